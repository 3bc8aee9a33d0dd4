//! [`Preset`]: the one knob every experiment takes for its size.

use std::fmt;
use std::str::FromStr;

use serde::Serialize;

use crate::{BenchError, Result};

/// How big an experiment runs. Each experiment turns the preset into its own
/// settings (graph scale, operations, intervals, repeats); flags override them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum Preset {
    /// Minutes on a 2-core machine: small graphs, short intervals.
    #[default]
    Quick,
    /// The papers' settings as far as one machine allows (longer).
    Full,
}

impl Preset {
    /// Every preset, for help texts.
    pub const ALL: [Preset; 2] = [Preset::Quick, Preset::Full];

    /// The preset's name.
    pub fn name(self) -> &'static str {
        match self {
            Preset::Quick => "quick",
            Preset::Full => "full",
        }
    }
}

impl fmt::Display for Preset {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Preset {
    type Err = BenchError;

    fn from_str(s: &str) -> Result<Preset> {
        Preset::ALL
            .into_iter()
            .find(|p| p.name() == s)
            .ok_or_else(|| BenchError::setting("--preset", s, "must be quick or full"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn presets_round_trip_by_name_and_reject_others() {
        for p in Preset::ALL {
            assert_eq!(p.name().parse::<Preset>().unwrap(), p);
            assert_eq!(p.to_string(), p.name());
        }
        let e = "huge".parse::<Preset>().unwrap_err().to_string();
        assert!(
            e.contains("--preset = huge") && e.contains("quick or full"),
            "{e}"
        );
    }
}
