//! The guard domain (see docs/architecture.md). Built in a later issue.
