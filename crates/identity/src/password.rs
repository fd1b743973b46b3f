//! Password hashing with argon2id at the OWASP parameters (m = 19 MiB, t = 2, p = 1).
//! Both functions are CPU-bound; the async forms run them on the hashing pool below.
//!
//! Each hash needs 19 MiB of working memory. On tokio's blocking pool (up to 512 threads)
//! a burst of logins — which anyone can send, no credential needed — hashed that many at once,
//! and every thread's malloc arena kept its 19 MiB afterwards: `cargo xtask bench` saw the
//! server's RSS grow from 0.5 to 2.3 GiB during the login scenario (docs/benchmarks.md). The
//! pool bounds both: `cores − 1` (at least one) long-lived threads hash, so at most that many
//! buffers exist, in as many arenas, and a bounded queue holds the rest; when the queue is
//! full, the request gets 503 at once instead of piling up.

use argon2::password_hash::rand_core::OsRng;
use argon2::password_hash::{PasswordHash, PasswordHasher, PasswordVerifier, SaltString};
use argon2::{Algorithm, Argon2, Params, Version};
use steward_core::{Error, Result};

/// Minimum password length accepted for local users.
pub const MIN_PASSWORD_CHARS: usize = 8;
/// Maximum password length (bounds hashing work per request).
pub const MAX_PASSWORD_CHARS: usize = 256;

fn hasher() -> Result<Argon2<'static>> {
    let params = Params::new(19 * 1024, 2, 1, None)
        .map_err(|e| Error::internal_msg(format!("argon2 parameters: {e}")))?;
    Ok(Argon2::new(Algorithm::Argon2id, Version::V0x13, params))
}

/// Hashes a password into a PHC string (`$argon2id$v=19$m=19456,t=2,p=1$…`).
pub fn hash_password(password: &str) -> Result<String> {
    let salt = SaltString::generate(&mut OsRng);
    hasher()?
        .hash_password(password.as_bytes(), &salt)
        .map(|h| h.to_string())
        .map_err(|e| Error::internal_msg(format!("password hashing failed: {e}")))
}

/// Checks a password against a stored PHC string (constant time in the hash comparison).
/// A malformed stored hash verifies as false.
pub fn verify_password(stored: &str, password: &str) -> bool {
    let Ok(parsed) = PasswordHash::new(stored) else {
        return false;
    };
    let Ok(h) = hasher() else {
        return false;
    };
    h.verify_password(password.as_bytes(), &parsed).is_ok()
}

/// Hashes and verifications waiting for a hashing thread, at most (about 5 s of work per
/// thread at ~20 ms a hash); beyond it a request is refused with 503.
const QUEUE: usize = 256;

type Job = Box<dyn FnOnce() + Send>;

/// The hashing threads and their queue.
struct Pool {
    jobs: std::sync::mpsc::SyncSender<Job>,
}

fn pool() -> Option<&'static Pool> {
    static POOL: std::sync::OnceLock<Option<Pool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let threads = std::thread::available_parallelism()
            .map_or(1, |n| n.get().saturating_sub(1))
            .max(1);
        let (jobs, queue) = std::sync::mpsc::sync_channel::<Job>(QUEUE);
        let queue = std::sync::Arc::new(std::sync::Mutex::new(queue));
        let mut started = 0;
        for i in 0..threads {
            let queue = queue.clone();
            let spawned = std::thread::Builder::new()
                .name(format!("argon2-{i}"))
                .spawn(move || loop {
                    let job = match queue.lock() {
                        Ok(q) => q.recv(),
                        Err(poisoned) => poisoned.into_inner().recv(),
                    };
                    let Ok(job) = job else { return };
                    // A panicking job drops its answer channel (the caller sees an error);
                    // the thread lives on.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                });
            match spawned {
                Ok(_) => started += 1,
                Err(e) => tracing::error!(error = %e, "could not start a password hashing thread"),
            }
        }
        (started > 0).then_some(Pool { jobs })
    })
    .as_ref()
}

/// Runs `f` on a hashing thread and waits for it without blocking the executor.
async fn on_pool<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> Result<T> {
    let Some(pool) = pool() else {
        return Err(Error::internal_msg(
            "no password hashing thread could be started",
        ));
    };
    let (tx, rx) = tokio::sync::oneshot::channel();
    let job: Job = Box::new(move || {
        let _ = tx.send(f());
    });
    match pool.jobs.try_send(job) {
        Ok(()) => {}
        Err(std::sync::mpsc::TrySendError::Full(_)) => {
            return Err(Error::new(
                steward_core::ErrorKind::Unavailable,
                "too many password checks are in progress; retry in a moment",
            ))
        }
        Err(std::sync::mpsc::TrySendError::Disconnected(_)) => {
            return Err(Error::internal_msg("the password hashing threads stopped"))
        }
    }
    rx.await
        .map_err(|_| Error::internal_msg("a password hashing task failed"))
}

/// Hashes on the hashing pool so that the async executor keeps serving.
pub async fn hash_password_async(password: String) -> Result<String> {
    on_pool(move || hash_password(&password)).await?
}

/// Verifies on the hashing pool.
pub async fn verify_password_async(stored: String, password: String) -> Result<bool> {
    on_pool(move || verify_password(&stored, &password)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hash_and_verify() {
        let h = hash_password("correct horse battery").unwrap();
        assert!(h.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{h}");
        assert!(verify_password(&h, "correct horse battery"));
        assert!(!verify_password(&h, "wrong"));
        assert!(!verify_password("not a hash", "x"));
    }

    #[tokio::test]
    async fn the_pool_hashes_and_verifies_concurrently_requested_work() {
        let tasks: Vec<_> = (0..6)
            .map(|i| tokio::spawn(hash_password_async(format!("password number {i}"))))
            .collect();
        for (i, task) in tasks.into_iter().enumerate() {
            let h = task.await.unwrap().unwrap();
            assert!(
                verify_password_async(h.clone(), format!("password number {i}"))
                    .await
                    .unwrap()
            );
            assert!(!verify_password_async(h, "wrong".into()).await.unwrap());
        }
        // The work ran on the named hashing threads, not on the test's.
        let name = on_pool(|| std::thread::current().name().map(str::to_owned))
            .await
            .unwrap();
        assert!(name.is_some_and(|n| n.starts_with("argon2-")));
    }

    #[tokio::test]
    async fn a_panicking_job_is_an_error_and_the_pool_lives_on() {
        let r: Result<()> = on_pool(|| panic!("boom")).await;
        assert!(r.is_err());
        assert_eq!(on_pool(|| 41 + 1).await.unwrap(), 42);
    }
}
