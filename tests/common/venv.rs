//! The repository's Python venv for tests that run PyPI tools (`scripts/venv.sh`: `.venv/`,
//! made on first use; PyPI is needed once).

use std::path::PathBuf;
use std::process::{Command, Stdio};

/// The repository root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The venv's directory, with the pinned requirements of `requirements` (a file of
/// `NAME==VERSION` lines, relative to the repository root) installed by `scripts/venv.sh`.
/// Panics when the venv cannot be made (the script says why on stderr).
pub fn venv_with(requirements: &str) -> PathBuf {
    let reqs = std::fs::read_to_string(root().join(requirements))
        .unwrap_or_else(|e| panic!("{requirements}: {e}"));
    let pins = reqs
        .lines()
        .map(|l| l.split('#').next().unwrap_or_default().trim())
        .filter(|l| !l.is_empty());
    let out = Command::new(root().join("scripts/venv.sh"))
        .args(pins)
        .stderr(Stdio::inherit())
        .output()
        .expect("run scripts/venv.sh");
    assert!(
        out.status.success(),
        "scripts/venv.sh could not make the venv with {requirements} (PyPI is needed once)"
    );
    PathBuf::from(String::from_utf8(out.stdout).expect("venv path").trim())
}
