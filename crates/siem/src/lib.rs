//! The siem domain (see docs/architecture.md). Built in a later issue.
