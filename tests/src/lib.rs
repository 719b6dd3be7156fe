//! Harness for the end-to-end tests: start the real flexd on a temporary socket.
