//! Issue #33: bulk actions from the CLI against a real `spindle server`: `stop --all
//! FILTER...` lists what it would touch and changes nothing, `--yes` acts on exactly
//! those, each audited; `pause`/`resume --all` the same way.

use crate::client::server;

#[test]
fn stop_all_is_a_dry_run_until_yes() {
    let server = server();
    // Two long naps of ann's to stop, and one request of another type to keep.
    let naps = [server.start(&["naps"]), server.start(&["naps"])];
    let kept = server.start(&["nap"]);
    for id in naps.iter().chain([&kept]) {
        server.wait_state(id, "RUNNING");
    }

    // A dry run: lists the two, changes nothing.
    let dry = server.run(&["stop", "--all", "type=naps", "states=RUNNING"]);
    assert_eq!(dry.status.code(), Some(0));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&dry.stdout),
        String::from_utf8_lossy(&dry.stderr),
    );
    for id in &naps {
        assert!(stdout.contains(id.as_str()), "{stdout}");
    }
    assert!(!stdout.contains(kept.as_str()), "{stdout}");
    assert_eq!(stdout.matches("would stop").count(), 2, "{stdout}");
    assert!(
        stderr.contains("a dry run: nothing changed. 2 requests to stop")
            && stderr.contains("spindle stop --all type=naps states=RUNNING --yes"),
        "{stderr}"
    );
    for id in &naps {
        assert!(server.stdout(&["status", id]).contains("state: RUNNING"));
    }

    // Paused and resumed together, then stopped with --yes.
    let paused = server.stdout(&["pause", "--all", "type=naps", "--yes"]);
    assert_eq!(paused.matches(" paused").count(), 2, "{paused}");
    let resumed = server.stdout(&["resume", "--all", "type=naps", "--yes"]);
    assert_eq!(resumed.matches(" resumed").count(), 2, "{resumed}");
    let stopped = server.run(&["stop", "--all", "type=naps", "states=RUNNING", "--yes"]);
    assert_eq!(
        stopped.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&stopped.stderr)
    );
    assert!(
        String::from_utf8_lossy(&stopped.stderr).contains("stopped 2 of 2 requests"),
        "{}",
        String::from_utf8_lossy(&stopped.stderr)
    );
    for id in &naps {
        server.wait_state(id, "STOPPED");
        // Audited per request, as the single action is.
        let info = server.stdout(&["info", id]);
        for action in ["pause", "resume", "stop"] {
            assert!(info.contains(&format!(" {action} by ann")), "{info}");
        }
    }
    assert!(server.stdout(&["status", &kept]).contains("state: RUNNING"));

    // A second stop of the same: each refused with why, exit 1.
    let again = server.run(&["stop", "--all", "type=naps", "--yes"]);
    assert_eq!(again.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&again.stdout);
    assert_eq!(stdout.matches("refused: ").count(), 2, "{stdout}");

    // Neither an id nor --all; and --yes without --all.
    assert_eq!(server.run(&["stop"]).status.code(), Some(2));
    assert_eq!(server.run(&["stop", &kept, "--yes"]).status.code(), Some(2));
    server.stdout(&["stop", &kept]);
}
