use super::state::*;
use std::collections::HashMap;

const NAME: &str = "tollgate";

fn node(port: u16) -> Node {
    Node {
        host: "10.0.0.1".into(),
        port,
    }
}

fn view(named: u16, monitored: u16, epoch: u64, failing_over: bool) -> View {
    View {
        named: node(named),
        monitored: node(monitored),
        epoch,
        failing_over,
    }
}

/// Answers of an ask that started after every event so far.
fn fresh(w: &mut Watch, views: &[View]) -> bool {
    let seq = w.seq();
    w.on_views(seq, views)
}

fn route(port: u16, held: bool) -> Option<Route> {
    Some(Route {
        master: node(port),
        held,
    })
}

#[test]
fn announcements_are_parsed_in_sentinel_formats() {
    let p = |channel, payload| parse_event(channel, payload, NAME);
    assert_eq!(
        p("+switch-master", "tollgate 10.0.0.1 6379 10.0.0.1 6380"),
        Some(Event::Switched { to: node(6380) })
    );
    assert_eq!(
        p("+try-failover", "master tollgate 10.0.0.1 6379"),
        Some(Event::FailingOver { of: node(6379) })
    );
    // A replica instance names its master after `@`.
    assert_eq!(
        p(
            "+failover-state-send-slaveof-noone",
            "slave 10.0.0.1:6380 10.0.0.1 6380 @ tollgate 10.0.0.1 6379"
        ),
        Some(Event::FailingOver { of: node(6379) })
    );
    assert_eq!(
        p(
            "-failover-abort-not-elected",
            "master tollgate 10.0.0.1 6379"
        ),
        Some(Event::Settled)
    );
    assert_eq!(
        p("+failover-end", "master tollgate 10.0.0.1 6379"),
        Some(Event::Settled)
    );
}

#[test]
fn announcements_about_other_masters_or_of_other_shapes_are_ignored() {
    let p = |channel, payload| parse_event(channel, payload, NAME);
    assert_eq!(p("+switch-master", "other 10.0.0.1 1 10.0.0.1 2"), None);
    assert_eq!(p("+try-failover", "master other 10.0.0.1 6379"), None);
    assert_eq!(
        p("+selected-slave", "slave a:1 10.0.0.1 1 @ other 10.0.0.1 2"),
        None
    );
    assert_eq!(p("+switch-master", "tollgate 10.0.0.1"), None);
    assert_eq!(
        p("+try-failover", "master tollgate 10.0.0.1 notaport"),
        None
    );
    assert_eq!(p("+sdown", "master tollgate 10.0.0.1 6379"), None);
    assert_eq!(p("+try-failover", ""), None);
}

#[test]
fn every_channel_is_subscribed() {
    let all = channels();
    assert!(all.contains(&"+switch-master"));
    assert!(all.contains(&"+try-failover"));
    assert!(all.contains(&"+failover-end"));
    for c in FAILOVER_CHANNELS.iter().chain(SETTLED_CHANNELS) {
        assert!(all.contains(c), "{c}");
    }
}

#[test]
fn views_are_read_from_sentinel_replies() {
    let reply: HashMap<String, String> = [
        ("name", "tollgate"),
        ("ip", "10.0.0.1"),
        ("port", "6379"),
        ("flags", "master,failover_in_progress"),
        ("config-epoch", "3"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .collect();
    assert_eq!(
        View::from_replies(&reply, ("10.0.0.1".into(), 6380)),
        Some(view(6380, 6379, 3, true))
    );
    let mut calm = reply.clone();
    calm.insert("flags".into(), "master".into());
    assert!(
        !View::from_replies(&calm, ("10.0.0.1".into(), 6379))
            .unwrap()
            .failing_over
    );
    let mut broken = reply;
    broken.remove("config-epoch");
    assert_eq!(View::from_replies(&broken, ("10.0.0.1".into(), 6379)), None);
}

#[test]
fn the_highest_epoch_names_the_master_then_the_majority_then_the_order() {
    // A sentinel that missed the failover (older epoch) is outvoted whatever its place.
    let stale_first = [view(6379, 6379, 1, false), view(6380, 6380, 2, false)];
    assert_eq!(choose(&stale_first), Some(node(6380)));
    let split = [
        view(6381, 6381, 2, false),
        view(6380, 6380, 2, false),
        view(6380, 6380, 2, false),
    ];
    assert_eq!(choose(&split), Some(node(6380)));
    let tie = [view(6381, 6381, 2, false), view(6380, 6380, 2, false)];
    assert_eq!(choose(&tie), Some(node(6381)));
    assert_eq!(choose(&[]), None);
}

#[test]
fn a_failover_holds_the_old_master_until_the_switch() {
    let mut w = Watch::default();
    let before = w.seq();
    assert!(fresh(&mut w, &[view(6379, 6379, 1, false)]));
    assert_eq!(w.route(), route(6379, false));
    // The leader announces the failover before it promotes the replica.
    assert!(!w.on_event(&Event::FailingOver { of: node(6379) }));
    assert_eq!(w.route(), route(6379, true));
    // An answer collected before the announcement does not lift the hold.
    assert!(!w.on_views(before, &[view(6379, 6379, 1, false)]));
    assert_eq!(w.route(), route(6379, true));
    // A later ask while the leader is at it keeps it.
    assert!(fresh(
        &mut w,
        &[view(6379, 6379, 1, true), view(6379, 6379, 1, false)]
    ));
    assert_eq!(w.route(), route(6379, true));
    // The switch moves the calls, unheld, and asks for confirmation.
    assert!(w.on_event(&Event::Switched { to: node(6380) }));
    assert_eq!(w.route(), route(6380, false));
    // A sentinel still failing the old master over does not hold the new one.
    assert!(fresh(
        &mut w,
        &[view(6380, 6380, 2, false), view(6379, 6379, 1, true)]
    ));
    assert_eq!(w.route(), route(6380, false));
}

#[test]
fn the_leader_past_the_promotion_names_the_promoted_replica() {
    // GET-MASTER-ADDR-BY-NAME gives the promoted replica once the leader reconfigures the
    // others; its epoch is already the new one.
    let mut w = Watch::default();
    w.on_event(&Event::FailingOver { of: node(6379) });
    assert!(fresh(
        &mut w,
        &[view(6379, 6379, 1, false), view(6380, 6379, 2, true)]
    ));
    assert_eq!(w.route(), route(6380, false));
}

#[test]
fn an_abandoned_failover_lifts_the_hold_once_no_sentinel_is_failing_over() {
    let mut w = Watch::default();
    fresh(&mut w, &[view(6379, 6379, 1, false)]);
    w.on_event(&Event::FailingOver { of: node(6379) });
    assert!(w.on_event(&Event::Settled));
    assert_eq!(w.route(), route(6379, true));
    assert!(fresh(&mut w, &[view(6379, 6379, 1, false)]));
    assert_eq!(w.route(), route(6379, false));
}

#[test]
fn no_answer_changes_nothing() {
    let mut w = Watch::default();
    w.on_event(&Event::Switched { to: node(6380) });
    w.on_event(&Event::FailingOver { of: node(6380) });
    let seq = w.seq();
    assert!(!w.on_views(seq, &[]));
    assert_eq!(w.route(), route(6380, true));
    // Before any answer there is no route at all.
    assert_eq!(Watch::default().route(), None);
}
