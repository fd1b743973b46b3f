//! The policy domain (see docs/architecture.md). Built in a later issue.
