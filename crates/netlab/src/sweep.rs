//! Names of a lab's parts, and removing the parts of labs whose creating
//! process is dead (a test run killed before its `Drop` ran).
//!
//! Every part carries its owner, the creating process's pid and a counter
//! of labs in that process:
//!
//! ```text
//!  namespaces        locus-<pid>-<lab>-sw   the switch (bridge br0)
//!                    locus-<pid>-<lab>-<i>  node i
//!  root interface    locus<X>               the host's end, owner in its
//!                                           alias "locus-netlab <pid>-<lab>"
//! ```
//!
//! Namespace names have no length limit, so they carry the whole pid; the
//! root interface's name (15 bytes at most) carries the lab's /24 instead,
//! which makes creating it the claim on that /24.

use std::path::Path;

use crate::error::Result;
use crate::tools::Tools;

/// The start of every lab namespace's name.
const NS_PREFIX: &str = "locus-";
/// The start of the root interface's name; digits follow.
pub(crate) const LINK_PREFIX: &str = "locus";
/// The start of the root interface's alias; the owner follows.
pub(crate) const ALIAS_PREFIX: &str = "locus-netlab ";

/// The process that made a lab, and which of its labs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Owner {
    pub(crate) pid: u32,
    pub(crate) lab: u64,
}

impl Owner {
    /// `<pid>-<lab>`, as in the names.
    pub(crate) fn tag(self) -> String {
        format!("{}-{}", self.pid, self.lab)
    }

    /// The switch's namespace.
    pub(crate) fn switch_namespace(self) -> String {
        format!("{NS_PREFIX}{}-sw", self.tag())
    }

    /// Node `i`'s namespace.
    pub(crate) fn node_namespace(self, node: usize) -> String {
        format!("{NS_PREFIX}{}-{node}", self.tag())
    }

    /// The root interface's alias.
    pub(crate) fn alias(self) -> String {
        format!("{ALIAS_PREFIX}{}", self.tag())
    }

    fn parse_tag(tag: &str) -> Option<Owner> {
        let (pid, lab) = tag.split_once('-')?;
        Some(Owner {
            pid: pid.parse().ok()?,
            lab: lab.parse().ok()?,
        })
    }

    /// The owner of a namespace named by [`Owner::switch_namespace`] or
    /// [`Owner::node_namespace`]; `None` for any other name.
    fn of_namespace(name: &str) -> Option<Owner> {
        let rest = name.strip_prefix(NS_PREFIX)?;
        let (tag, part) = rest.rsplit_once('-')?;
        let part_ok =
            part == "sw" || (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()));
        part_ok.then(|| Owner::parse_tag(tag)).flatten()
    }

    /// The owner named by a root interface's alias.
    fn of_alias(alias: &str) -> Option<Owner> {
        Owner::parse_tag(alias.trim().strip_prefix(ALIAS_PREFIX)?)
    }
}

/// Whether `name` is a lab's root interface, `locus<X>`.
pub(crate) fn is_lab_link(name: &str) -> bool {
    name.strip_prefix(LINK_PREFIX)
        .is_some_and(|x| !x.is_empty() && x.len() <= 3 && x.bytes().all(|b| b.is_ascii_digit()))
}

/// Whether process `pid` is running. A zombie has exited (its namespaces
/// are released) though `/proc` still lists it until it is reaped.
fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state is the first field after the command's closing paren.
        Ok(stat) => match stat.rsplit_once(')') {
            Some((_, rest)) => !rest.trim_start().starts_with('Z'),
            None => true,
        },
        Err(e) => e.kind() != std::io::ErrorKind::NotFound,
    }
}

/// The names in `ip netns list` (one per line, maybe followed by `(id: N)`).
pub(crate) fn namespaces(tools: &Tools) -> Result<Vec<String>> {
    let listing = tools.ip(["netns", "list"])?;
    Ok(listing
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_string)
        .collect())
}

/// Kills every process left inside namespace `ns`, then removes it. The
/// processes are ones a caller started there (`Netlab::command`) and did not
/// end; while one runs, the namespace, its veth and so the lab's /24 would
/// outlive the lab. Never this process, whatever `ip` says.
pub(crate) fn remove_namespace(tools: &Tools, ns: &str) -> Result<()> {
    let own = std::process::id();
    for pid in tools.ip(["netns", "pids", ns])?.split_whitespace() {
        match pid.parse::<u32>() {
            Ok(pid) if pid != own => {
                if let Ok(pid) = libc::pid_t::try_from(pid) {
                    // SAFETY: kill has no memory-safety preconditions; a
                    // pid that has exited meanwhile gives ESRCH, ignored.
                    unsafe { libc::kill(pid, libc::SIGKILL) };
                }
            }
            _ => {}
        }
    }
    tools.ip(["netns", "delete", ns]).map(drop)
}

/// Removes the parts of every lab whose creating process is dead: its
/// namespaces (with any process left in them) and its root interface.
/// Returns how many such labs it found. A part that another process's sweep
/// removed first is not an error; any other failure is printed to stderr
/// and the sweep goes on.
pub(crate) fn sweep(tools: &Tools) -> Result<usize> {
    let mut dead: Vec<Owner> = Vec::new();
    let mut note = |owner: Owner| {
        if !dead.contains(&owner) && !pid_alive(owner.pid) {
            dead.push(owner);
        }
    };
    let listed = namespaces(tools)?;
    for owner in listed.iter().filter_map(|ns| Owner::of_namespace(ns)) {
        note(owner);
    }
    let links = lab_links()?;
    for (_, owner) in &links {
        note(*owner);
    }
    for owner in &dead {
        // The root interface first: deleting it is synchronous, so its /24
        // is free when the sweep returns (a namespace is freed in the
        // background once its last user is gone).
        for (link, _) in links.iter().filter(|(_, o)| o == owner) {
            if let Err(e) = tools.ip(["link", "delete", link.as_str()]) {
                if Path::new("/sys/class/net").join(link).exists() {
                    eprintln!("netlab sweep: {e}");
                }
            }
        }
        for ns in listed
            .iter()
            .filter(|ns| Owner::of_namespace(ns) == Some(*owner))
        {
            if let Err(e) = remove_namespace(tools, ns) {
                if Path::new("/run/netns").join(ns).exists() {
                    eprintln!("netlab sweep: {e}");
                }
            }
        }
    }
    Ok(dead.len())
}

/// The root namespace's lab interfaces with the owners their aliases name.
fn lab_links() -> Result<Vec<(String, Owner)>> {
    let dir = Path::new("/sys/class/net");
    let entries = std::fs::read_dir(dir).map_err(|source| crate::NetlabError::Io {
        what: format!("listing {}", dir.display()),
        source,
    })?;
    Ok(entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|name| is_lab_link(name))
        .filter_map(|name| {
            // An interface without the alias is being made right now by a
            // live lab (the alias is set just after), or is not a lab's.
            let alias = std::fs::read_to_string(dir.join(&name).join("ifalias")).ok()?;
            Some((name, Owner::of_alias(&alias)?))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_to_their_owner_and_other_names_have_none() {
        let owner = Owner {
            pid: 4_194_303,
            lab: 17,
        };
        assert_eq!(owner.switch_namespace(), "locus-4194303-17-sw");
        assert_eq!(Owner::of_namespace(&owner.switch_namespace()), Some(owner));
        assert_eq!(Owner::of_namespace(&owner.node_namespace(15)), Some(owner));
        assert_eq!(
            Owner::of_alias(&format!("{}\n", owner.alias())),
            Some(owner)
        );
        for other in [
            "locus-",
            "locus-12",
            "locus-12-3",
            "locus-x-3-0",
            "locus-1-2-eth",
            "netns-1-2-0",
        ] {
            assert_eq!(Owner::of_namespace(other), None, "{other}");
        }
        assert!(is_lab_link("locus213"));
        assert!(!is_lab_link("locus"));
        assert!(!is_lab_link("locus1234"));
        assert!(!is_lab_link("locusbr"));
    }

    #[test]
    fn this_process_is_alive_and_an_unused_pid_is_not() {
        assert!(pid_alive(std::process::id()));
        // Above the kernel's largest pid_max (2^22), so never a process.
        assert!(!pid_alive(4_194_305));
    }
}
