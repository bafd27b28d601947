use std::io;

/// The result type of every fallible Strata operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Every error Strata reports. Bad input and bad disk contents produce one of these, never a panic.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Persisted bytes failed a checksum or a structural check. Never returned as data.
    #[error("corruption in {file} at offset {offset}: {what}")]
    Corruption { file: String, offset: u64, what: String },

    /// The operating system (or a simulated disk) reported an error.
    #[error("I/O error while {context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },

    /// The caller passed something the engine cannot accept (oversized key, bad option, ...).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),

    /// The engine (or this build) does not implement the requested operation; the text says why.
    #[error("unsupported: {0}")]
    Unsupported(String),

    /// The directory holds data this build cannot open as requested (other engine, newer format).
    #[error("incompatible store: {0}")]
    Incompatible(String),

    /// Another `Db` (in this or another process) holds the directory's lock.
    #[error("{0} is locked by another open database (another process, or another handle in this process)")]
    Locked(String),

    /// The database was closed; no further operations are accepted.
    #[error("the database is closed")]
    Closed,

    /// An earlier write or sync failed, so the durable state is unknown; reopen to recover.
    /// Sticky, like redb's `PreviousIo`: every later operation returns it.
    #[error("the database is poisoned by an earlier failure ({0}); close and reopen it to recover")]
    Poisoned(String),
}

impl Error {
    /// Wraps an OS error with a sentence naming what was being done (and to which file).
    pub fn io(context: impl Into<String>, source: io::Error) -> Self {
        Error::Io { context: context.into(), source }
    }

    pub fn corruption(file: impl Into<String>, offset: u64, what: impl Into<String>) -> Self {
        Error::Corruption { file: file.into(), offset, what: what.into() }
    }

    pub fn invalid(msg: impl Into<String>) -> Self {
        Error::InvalidArgument(msg.into())
    }

    pub fn unsupported(msg: impl Into<String>) -> Self {
        Error::Unsupported(msg.into())
    }

    /// True when the error is (or wraps) "no space left on device".
    pub fn is_no_space(&self) -> bool {
        match self {
            Error::Io { source, .. } => {
                source.kind() == io::ErrorKind::StorageFull || source.raw_os_error() == Some(28)
            }
            Error::Poisoned(msg) => msg.contains("No space left") || msg.contains("no space left"),
            _ => false,
        }
    }

    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corruption { .. })
    }

    /// A copy of this error suitable for returning again later (I/O sources are not `Clone`).
    pub fn duplicate(&self) -> Error {
        match self {
            Error::Corruption { file, offset, what } => {
                Error::Corruption { file: file.clone(), offset: *offset, what: what.clone() }
            }
            Error::Io { context, source } => Error::Io {
                context: context.clone(),
                source: match source.raw_os_error() {
                    Some(code) => io::Error::from_raw_os_error(code),
                    None => io::Error::new(source.kind(), source.to_string()),
                },
            },
            Error::InvalidArgument(m) => Error::InvalidArgument(m.clone()),
            Error::Unsupported(m) => Error::Unsupported(m.clone()),
            Error::Incompatible(m) => Error::Incompatible(m.clone()),
            Error::Locked(m) => Error::Locked(m.clone()),
            Error::Closed => Error::Closed,
            Error::Poisoned(m) => Error::Poisoned(m.clone()),
        }
    }
}
