//! Access tokens: HS256 JWTs with `sub`, `tenant_id`, `role`, `jti`, `iat`, `exp` (contract 5.3).

use jsonwebtoken::{decode, encode, Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};
use steward_core::{Error, Result};

#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct Claims {
    pub sub: String,
    pub tenant_id: String,
    pub role: String,
    pub jti: String,
    pub iat: i64,
    pub exp: i64,
}

/// Signs and checks tokens with `SECRET_KEY`.
#[derive(Clone)]
pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    pub lifetime_seconds: i64,
}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenKeys")
            .field("lifetime_seconds", &self.lifetime_seconds)
            .finish_non_exhaustive()
    }
}

impl TokenKeys {
    pub fn new(secret: &str, lifetime_seconds: i64) -> Self {
        Self {
            encoding: EncodingKey::from_secret(secret.as_bytes()),
            decoding: DecodingKey::from_secret(secret.as_bytes()),
            lifetime_seconds,
        }
    }

    pub fn issue(&self, claims: &Claims) -> Result<String> {
        encode(&Header::new(Algorithm::HS256), claims, &self.encoding)
            .map_err(|e| Error::internal_msg(format!("cannot sign a token: {e}")))
    }

    /// Checks signature, algorithm (HS256 only) and expiry (no leeway: refused from the second
    /// `exp` is reached). Every failure is 401 `invalid_credentials`.
    pub fn verify(&self, token: &str, now_unix: i64) -> Result<Claims> {
        let mut validation = Validation::new(Algorithm::HS256);
        validation.leeway = 0;
        validation.set_required_spec_claims(&["exp", "sub"]);
        let data = decode::<Claims>(token, &self.decoding, &validation)
            .map_err(|_| Error::invalid_credentials("the access token is invalid or expired"))?;
        if data.claims.exp <= now_unix {
            return Err(Error::invalid_credentials("the access token has expired"));
        }
        Ok(data.claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claims(exp: i64) -> Claims {
        Claims {
            sub: "u".into(),
            tenant_id: "t".into(),
            role: "viewer".into(),
            jti: "j".into(),
            iat: 0,
            exp,
        }
    }

    #[test]
    fn round_trip_and_expiry() {
        let now = time::OffsetDateTime::now_utc().unix_timestamp();
        let keys = TokenKeys::new("secret", 60);
        let t = keys.issue(&claims(now + 100)).unwrap();
        assert_eq!(keys.verify(&t, now).unwrap(), claims(now + 100));
        assert!(
            keys.verify(&t, now + 100).is_err(),
            "refused from the second exp is reached"
        );
        assert!(TokenKeys::new("other", 60).verify(&t, now).is_err());
        assert!(keys.verify("not.a.jwt", now).is_err());
        let old = keys.issue(&claims(now - 1)).unwrap();
        assert!(keys.verify(&old, now).is_err(), "a past exp is refused");
    }

    #[test]
    fn alg_none_is_refused() {
        use base64_like::b64;
        let keys = TokenKeys::new("secret", 60);
        let head = b64(br#"{"alg":"none","typ":"JWT"}"#);
        let body = b64(serde_json::to_string(&claims(i64::MAX / 2))
            .unwrap()
            .as_bytes());
        assert!(keys.verify(&format!("{head}.{body}."), 0).is_err());
    }

    mod base64_like {
        /// URL-safe base64 without padding (enough for the test).
        pub fn b64(input: &[u8]) -> String {
            const T: &[u8; 64] =
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
            let mut out = String::new();
            for chunk in input.chunks(3) {
                let b = [
                    chunk[0],
                    *chunk.get(1).unwrap_or(&0),
                    *chunk.get(2).unwrap_or(&0),
                ];
                let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
                for i in 0..=chunk.len() {
                    out.push(T[((n >> (18 - 6 * i)) & 63) as usize] as char);
                }
            }
            out
        }
    }
}
