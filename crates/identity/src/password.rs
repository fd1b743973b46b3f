//! Password hashing with argon2id at the OWASP parameters (m = 19 MiB, t = 2, p = 1).
//! Both functions are CPU-bound: call them from a blocking thread (`spawn_blocking`).

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

/// Runs the hash on the blocking pool so that the async executor keeps serving.
pub async fn hash_password_async(password: String) -> Result<String> {
    tokio::task::spawn_blocking(move || hash_password(&password))
        .await
        .map_err(|e| Error::internal_msg(format!("hashing task failed: {e}")))?
}

/// Runs the verification on the blocking pool.
pub async fn verify_password_async(stored: String, password: String) -> Result<bool> {
    tokio::task::spawn_blocking(move || verify_password(&stored, &password))
        .await
        .map_err(|e| Error::internal_msg(format!("verification task failed: {e}")))
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
}
