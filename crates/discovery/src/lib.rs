//! The discovery domain (see docs/architecture.md). Built in a later issue.
