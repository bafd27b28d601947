# Sourced by the server-*.sh scripts.

# Waits (up to 10 s) until something listens on 127.0.0.1:$1; with a process id $2, fails at
# once if that process exits first. Silent: the caller says what did not start.
listening() {
    for _ in $(seq 100); do
        if [ -n "${2:-}" ] && ! kill -0 "$2" 2>/dev/null; then
            return 1
        fi
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    return 1
}

# `listening` for a port that must come up: fails with a message otherwise.
wait_for_port() {
    listening "$1" && return 0
    echo "$(basename "$0"): nothing listens on port $1" >&2
    return 1
}

# Starts a server on a random port from $1 up with the function named $2, which reads `port`,
# starts the server in the background and sets `pid`. A server that exits before it listens (its
# port was taken) is started again on another port, three ports at most.
start_on_random_port() {
    local base="$1" launch="$2"
    for _ in 1 2 3; do
        port=$((base + RANDOM % 20000))
        "$launch"
        if listening "$port" "$pid"; then
            return 0
        fi
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    echo "$(basename "$0"): the server exited or did not listen on three ports in turn" >&2
    return 1
}
