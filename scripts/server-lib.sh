# Sourced by the server-*.sh scripts.

# Waits (up to 10 s) until something listens on 127.0.0.1:$1; fails with a message otherwise.
wait_for_port() {
    for _ in $(seq 100); do
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
        sleep 0.1
    done
    echo "$(basename "$0"): nothing listens on port $1" >&2
    return 1
}
