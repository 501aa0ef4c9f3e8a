//! The control socket is private: created 0600 in a 0700 directory, and a peer of
//! another uid is refused by its credentials even when the file modes would let it
//! in (a directory made too open by hand).

mod common;

use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::time::Duration;

use common::*;

/// Connects to `socket` as `uid`, sends a status request and returns what came back.
fn ask_as(uid: u32, socket: &Path) -> String {
    let script = r#"
import socket, sys
s = socket.socket(socket.AF_UNIX)
s.settimeout(5)
try:
    s.connect(sys.argv[1])
    s.sendall(b'{"v":1,"op":"status"}\n')
    data = b""
    while True:
        chunk = s.recv(65536)
        if not chunk:
            break
        data += chunk
    print(data.decode(), end="")
except Exception as e:
    print("ERROR " + type(e).__name__, end="")
"#;
    let mut cmd = std::process::Command::new("python3");
    cmd.arg("-c").arg(script).arg(socket);
    // SAFETY: setgid/setuid are async-signal-safe; nothing else runs before exec.
    unsafe {
        cmd.pre_exec(move || {
            if uid != 0 && (nix::libc::setgid(uid) != 0 || nix::libc::setuid(uid) != 0) {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let out = run_bounded(cmd, Duration::from_secs(20));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn the_socket_is_private_and_other_users_are_refused() {
    if !nix::unistd::getuid().is_root() {
        eprintln!("this test switches to another uid and needs root; skipped");
        return;
    }
    let fleet = TestFleet::fixtures("security-peer", &[("one", &[], "")]);
    assert_code(&fleet.run(&["up"]), 0);
    let state = std::fs::canonicalize(fleet.state_dir()).unwrap();
    let socket = state.join("control.sock");
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(&state), 0o700);
    assert_eq!(mode(&socket), 0o600);

    // The owner is answered.
    assert!(ask_as(0, &socket).contains("\"type\":\"reply\""));
    // Another user cannot even reach the socket through the private directory.
    assert!(ask_as(65534, &socket).starts_with("ERROR"), "no way in");

    // Loosen the modes by hand, as a careless admin might: the credentials check
    // still refuses the other user, who gets no answer at all.
    // Only directories that others cannot pass through are opened (the test's own
    // temporary directory); every bit of their mode is restored afterwards.
    let full = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o7777;
    let mut parents = vec![];
    let mut p = state.as_path();
    while let Some(parent) = p.parent() {
        if full(parent) & 0o001 == 0 {
            parents.push((parent.to_path_buf(), full(parent)));
        }
        p = parent;
    }
    for (dir, m) in &parents {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(m | 0o011)).unwrap();
    }
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o711)).unwrap();
    std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
    let answer = ask_as(65534, &socket);
    // Restore before asserting, so a failure leaves nothing open.
    std::fs::set_permissions(&state, std::fs::Permissions::from_mode(0o700)).unwrap();
    for (dir, m) in &parents {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(*m)).unwrap();
    }
    assert!(
        !answer.contains("\"type\":\"reply\""),
        "another uid got an answer: {answer}"
    );
    // The supervisor goes on serving its owner.
    assert_code(&fleet.run(&["status"]), 0);
    assert_code(&fleet.run(&["down"]), 0);
    fleet.assert_no_leftovers();
}
