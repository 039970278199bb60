//! The Debian package as an admin gets it: `scripts/package.sh` builds it,
//! `dpkg-deb` shows what it holds, and a real `dpkg` installs, upgrades,
//! removes and purges it in a directory of its own (`--root`, maintainer
//! scripts run with `$DPKG_ROOT`), so the host is left as it was.
//!
//! The package is made around the binary this test run already has
//! (`scripts/package.sh --prebuilt dev`): the same assets, scripts and
//! stripping as the release package, without a release build of several
//! minutes inside the test suite.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn run(command: &mut Command) -> Output {
    let shown = format!("{command:?}");
    let out = command.output().unwrap_or_else(|e| panic!("{shown}: {e}"));
    assert!(
        out.status.success(),
        "{shown}: {}\n{}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `dpkg --root ROOT ARGS`: maintainer scripts outside a chroot, with
/// `DPKG_ROOT=ROOT`; dependencies (libc, systemd) are the host's, not in
/// ROOT.
fn dpkg(root: &Path, args: &[&str]) -> Output {
    run(Command::new("dpkg")
        .arg(format!("--root={}", root.display()))
        .args([
            "--force-script-chrootless",
            "--force-depends",
            "--log=/dev/null",
        ])
        .args(args))
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .permissions()
        .mode()
        & 0o7777
}

/// An empty system for dpkg: its database and nothing else.
fn empty_root() -> tempfile::TempDir {
    let root = tempfile::tempdir().unwrap();
    for dir in ["var/lib/dpkg/info", "var/lib/dpkg/updates", "etc"] {
        std::fs::create_dir_all(root.path().join(dir)).unwrap();
    }
    std::fs::write(root.path().join("var/lib/dpkg/status"), "").unwrap();
    root
}

fn build() -> PathBuf {
    let out = run(Command::new("scripts/package.sh")
        .args(["--prebuilt", "dev"])
        .current_dir(env!("CARGO_MANIFEST_DIR")));
    let stdout = text(&out);
    let last = stdout.lines().last().unwrap_or_default();
    let deb = PathBuf::from(last.trim());
    let name = format!("vigie_{}-1_amd64.deb", env!("CARGO_PKG_VERSION"));
    assert_eq!(
        deb.file_name().and_then(|n| n.to_str()),
        Some(name.as_str()),
        "last line of scripts/package.sh: {stdout}"
    );
    assert!(
        deb.parent().is_some_and(|d| d.ends_with("debian-dev")) && deb.is_file(),
        "{}",
        deb.display()
    );
    deb
}

/// The contents listing: `(mode string, owner, path)` per entry.
fn contents(deb: &Path) -> Vec<(String, String, String)> {
    text(&run(Command::new("dpkg-deb").arg("-c").arg(deb)))
        .lines()
        .map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let path = fields[5].trim_start_matches('.').to_string();
            (fields[0].to_string(), fields[1].to_string(), path)
        })
        .collect()
}

fn check_contents(deb: &Path) {
    let listed = contents(deb);
    let entry = |path: &str| {
        listed
            .iter()
            .find(|(_, _, p)| p == path)
            .unwrap_or_else(|| panic!("{path} not in the package: {listed:#?}"))
    };
    for (path, wanted) in [
        ("/usr/bin/vigie", "-rwxr-xr-x"),
        ("/lib/systemd/system/vigie.service", "-rw-r--r--"),
        ("/usr/lib/sysusers.d/vigie.conf", "-rw-r--r--"),
        ("/etc/vigie/config.toml", "-rw-r--r--"),
        ("/etc/vigie/checks/site.toml", "-rw-r--r--"),
        ("/usr/share/man/man1/vigie.1.gz", "-rw-r--r--"),
        ("/usr/share/man/man1/vigie-restore.1.gz", "-rw-r--r--"),
        ("/usr/share/bash-completion/completions/vigie", "-rw-r--r--"),
        ("/usr/share/zsh/vendor-completions/_vigie", "-rw-r--r--"),
        ("/usr/share/doc/vigie/README.md", "-rw-r--r--"),
        ("/usr/share/doc/vigie/systemd/README.md", "-rw-r--r--"),
        ("/usr/share/doc/vigie/checks/README.md", "-rw-r--r--"),
        ("/usr/share/doc/vigie/copyright", "-rw-r--r--"),
    ] {
        let (mode, owner, _) = entry(path);
        assert_eq!((mode.as_str(), owner.as_str()), (wanted, "0/0"), "{path}");
    }
    // Nothing of the build machine's: no /usr/local, no target/.
    assert!(
        listed
            .iter()
            .all(|(_, _, p)| !p.contains("/usr/local") && !p.contains("target")),
        "{listed:#?}"
    );

    let field = |name: &str| text(&run(Command::new("dpkg-deb").arg("-f").arg(deb).arg(name)));
    assert_eq!(field("Package").trim(), "vigie");
    assert_eq!(field("Architecture").trim(), "amd64");
    assert!(field("Depends").contains("libc6"), "{}", field("Depends"));

    let control = tempfile::tempdir().unwrap();
    run(Command::new("dpkg-deb")
        .arg("-e")
        .arg(deb)
        .arg(control.path()));
    let conffiles = std::fs::read_to_string(control.path().join("conffiles")).unwrap();
    let mut conffiles: Vec<&str> = conffiles.lines().collect();
    conffiles.sort();
    let mut wanted = vec!["/etc/vigie/config.toml".to_string()];
    for file in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("checks")).unwrap() {
        let name = file.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".toml") {
            wanted.push(format!("/etc/vigie/checks/{name}"));
        }
    }
    wanted.sort();
    assert_eq!(conffiles, wanted);
    for script in ["postinst", "prerm", "postrm"] {
        let shipped = std::fs::read(control.path().join(script)).unwrap();
        let source = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("debian")
                .join(script),
        )
        .unwrap();
        assert_eq!(shipped, source, "{script}");
        assert_eq!(mode(&control.path().join(script)), 0o755, "{script}");
    }
}

/// The binary has no symbol table and no debug information
/// (`.debug_gdb_scripts`, which rustc puts in every binary, is neither).
fn check_stripped(binary: &Path) {
    let sections = text(&run(Command::new("readelf")
        .arg("-S")
        .arg("-W")
        .arg(binary)));
    assert!(sections.contains(".text"), "{sections}");
    for section in [".symtab", ".strtab", ".debug_info", ".debug_line"] {
        assert!(
            !sections.contains(&format!("{section} ")),
            "not stripped ({section}): {sections}"
        );
    }
}

#[test]
fn the_package_installs_upgrades_keeping_edits_and_purges_cleanly() {
    let deb = build();
    check_contents(&deb);

    let root = empty_root();
    let r = root.path();
    let deb_arg = deb.to_str().unwrap();
    dpkg(r, &["-i", deb_arg]);
    let vigie = r.join("usr/bin/vigie");
    check_stripped(&vigie);
    let unit = std::fs::read(r.join("lib/systemd/system/vigie.service")).unwrap();
    let source = std::fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("systemd/vigie.service"));
    assert_eq!(unit, source.unwrap(), "the unit is systemd/vigie.service");
    let passwd = std::fs::read_to_string(r.join("etc/passwd")).unwrap();
    assert!(
        passwd
            .lines()
            .any(|l| l.starts_with("vigie:") && l.ends_with(":/var/lib/vigie:/usr/sbin/nologin")),
        "{passwd}"
    );
    let group = std::fs::read_to_string(r.join("etc/group")).unwrap();
    assert!(group.lines().any(|l| l.starts_with("vigie:")), "{group}");
    assert_eq!(mode(&r.join("etc/vigie/credentials")), 0o700);
    // Enabled nowhere: the admin enables it once the config is edited.
    assert!(!r
        .join("etc/systemd/system/multi-user.target.wants/vigie.service")
        .exists());

    // Man pages and completions from the CLI's definition: every command.
    let man = run(Command::new("zcat").arg(r.join("usr/share/man/man1/vigie.1.gz")));
    let man = text(&man);
    assert!(
        man.contains(".TH vigie 1") && man.contains("vigie\\-restore(1)"),
        "{man}"
    );
    let bash = std::fs::read_to_string(r.join("usr/share/bash-completion/completions/vigie"));
    let zsh = std::fs::read_to_string(r.join("usr/share/zsh/vendor-completions/_vigie"));
    let (bash, zsh) = (bash.unwrap(), zsh.unwrap());
    assert!(bash.contains("complete -F _vigie"), "{bash}");
    assert!(zsh.starts_with("#compdef vigie"), "{zsh}");
    for command in ["restore", "validate", "history", "silence", "incident"] {
        assert!(bash.contains(command) && zsh.contains(command), "{command}");
    }

    // The packaged config validates as shipped, its state under
    // /var/lib/vigie.
    let config = r.join("etc/vigie/config.toml");
    let packaged = std::fs::read_to_string(&config).unwrap();
    assert!(
        packaged
            .lines()
            .any(|l| l.starts_with("state_dir = \"/var/lib/vigie\"")),
        "{packaged}"
    );
    run(Command::new(&vigie)
        .arg("--config")
        .arg(&config)
        .arg("validate")
        .env_remove("CREDENTIALS_DIRECTORY"));

    // Upgrade (the same version again: postinst is called with the old
    // version): the edited conffile and the history stay.
    let edited = format!("{packaged}\n# edited by the admin\n");
    std::fs::write(&config, &edited).unwrap();
    std::fs::create_dir_all(r.join("var/lib/vigie/history")).unwrap();
    std::fs::write(r.join("var/lib/vigie/history/db"), "history").unwrap();
    dpkg(r, &["-i", deb_arg]);
    assert_eq!(std::fs::read_to_string(&config).unwrap(), edited);
    assert!(r.join("var/lib/vigie/history/db").exists());

    // Remove: the program goes, the config, credentials and history stay.
    dpkg(r, &["-r", "vigie"]);
    assert!(!vigie.exists());
    assert!(!r.join("lib/systemd/system/vigie.service").exists());
    assert_eq!(std::fs::read_to_string(&config).unwrap(), edited);
    assert!(r.join("etc/vigie/credentials").is_dir());
    assert!(r.join("var/lib/vigie/history/db").exists());

    // Purge: everything of vigie's goes but its user.
    dpkg(r, &["-P", "vigie"]);
    for gone in ["etc/vigie", "var/lib/vigie", "usr/share/doc/vigie"] {
        assert!(!r.join(gone).exists(), "{gone} left after purge");
    }
    let passwd = std::fs::read_to_string(r.join("etc/passwd")).unwrap();
    assert!(passwd.lines().any(|l| l.starts_with("vigie:")), "{passwd}");
    let status = std::fs::read_to_string(r.join("var/lib/dpkg/status")).unwrap();
    assert!(!status.contains("Package: vigie"), "{status}");
}
