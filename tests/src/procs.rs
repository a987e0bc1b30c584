//! Starting and stopping the real waterline binaries for integration tests.
