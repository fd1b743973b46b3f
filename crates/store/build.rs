//! The migrations are embedded at compile time (`embed_migrations!`); a new migration directory
//! must rebuild this crate, which Cargo only knows when told to watch the directories.

fn main() {
    println!("cargo:rerun-if-changed=../../migrations/postgres");
    println!("cargo:rerun-if-changed=../../migrations/sqlite");
    println!("cargo:rerun-if-changed=build.rs");
}
