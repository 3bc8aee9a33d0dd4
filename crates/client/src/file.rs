//! What a client reads of a cluster file: each server's client address and
//! the secret. The servers read the same file strictly (`locus-server`);
//! a client ignores sections it does not need, so it keeps working with
//! files written by newer servers.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use locus_fabric::auth::{Secret, SECRET_ENV};

use crate::error::{ClientError, Result};

/// The client's view of a cluster file.
#[derive(Debug, Clone)]
pub struct ClientFile {
    /// Client addresses, index = machine id.
    pub servers: Vec<SocketAddr>,
    /// `LOCUS_SECRET`, or `[cluster] secret`.
    pub secret: Option<Secret>,
}

impl ClientFile {
    /// Reads `path`.
    pub fn load(path: &Path) -> Result<ClientFile> {
        let bad = |reason: String| ClientError::ClusterFile {
            path: PathBuf::from(path),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| bad(format!("cannot read: {e}")))?;
        ClientFile::parse(&text).map_err(bad)
    }

    /// Parses the text of a cluster file.
    pub fn parse(text: &str) -> Result<ClientFile, String> {
        let doc: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
        let configured = match doc.get("cluster").and_then(|c| c.get("secret")) {
            None => None,
            Some(toml::Value::String(s)) => Some(s.as_str()),
            Some(_) => return Err("cluster.secret must be a string".into()),
        };
        let secret = Secret::from_env_or(configured, SECRET_ENV).map_err(|e| e.to_string())?;
        let entries = match doc.get("server") {
            Some(toml::Value::Array(a)) => a,
            _ => return Err("no [[server]] entries".into()),
        };
        let mut servers: Vec<Option<SocketAddr>> = vec![None; entries.len()];
        for (i, e) in entries.iter().enumerate() {
            let id = e
                .get("id")
                .and_then(|v| v.as_integer())
                .ok_or_else(|| format!("server entry {i} has no integer id"))?;
            let addr: SocketAddr = e
                .get("client")
                .and_then(|v| v.as_str())
                .ok_or_else(|| format!("server {id} has no client address"))?
                .parse()
                .map_err(|e| format!("server {id}: client address: {e}"))?;
            let slot = usize::try_from(id)
                .ok()
                .and_then(|i| servers.get_mut(i))
                .ok_or_else(|| {
                    format!("server id {id}: ids must number the servers 0..n-1, each once")
                })?;
            if slot.replace(addr).is_some() {
                return Err(format!("server id {id} appears twice"));
            }
        }
        let servers = servers
            .into_iter()
            .map(|s| s.ok_or_else(|| "server ids must number the servers 0..n-1".to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(ClientFile { servers, secret })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_are_placed_by_id_and_unknown_sections_are_ignored() {
        let f = ClientFile::parse(
            "[cluster]\nsecret = \"0123456789abcdef0123\"\n\
             [[server]]\nid = 1\nfabric = \"127.0.0.1:1\"\nclient = \"127.0.0.1:11\"\n\
             [[server]]\nid = 0\nclient = \"127.0.0.1:10\"\n[store]\nwhatever = 1\n",
        )
        .unwrap();
        assert_eq!(
            f.servers,
            vec![
                "127.0.0.1:10".parse().unwrap(),
                "127.0.0.1:11".parse().unwrap()
            ]
        );
        assert!(f.secret.is_some() || std::env::var_os(SECRET_ENV).is_some());
    }

    #[test]
    fn bad_files_say_why() {
        for (text, needle) in [
            ("", "no [[server]]"),
            ("[[server]]\nid = 1\nclient = \"127.0.0.1:1\"\n", "0..n-1"),
            (
                "[[server]]\nid = 0\nclient = \"127.0.0.1:1\"\n[[server]]\nid = 0\nclient = \"127.0.0.1:2\"\n",
                "twice",
            ),
            ("[[server]]\nid = 0\nclient = \"nowhere\"\n", "client address"),
            ("[[server]]\nclient = \"127.0.0.1:1\"\n", "no integer id"),
            ("[[server", "expected"),
        ] {
            let e = ClientFile::parse(text).unwrap_err();
            assert!(e.contains(needle), "{text:?}: {e}");
        }
    }
}
