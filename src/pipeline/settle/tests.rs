use super::*;
use crate::config::StatusSet;

fn login() -> Counting {
    let mut set = StatusSet::default();
    set.insert(401);
    set.insert(403);
    Counting {
        status: Some(set),
        refund_on: RefundOn::default(),
    }
}

fn refunds(r: RefundOn) -> Counting {
    Counting {
        status: None,
        refund_on: r,
    }
}

const GONE: Moment = Moment::NoHead {
    status: 0,
    client_gone: true,
    upstream_failed: true,
};

fn unavailable(status: u16) -> Moment {
    Moment::NoHead {
        status,
        client_gone: false,
        upstream_failed: true,
    }
}

#[test]
fn only_listed_statuses_stay_counted() {
    let c = login();
    assert!(!gives_back(&c, Moment::Head(401)));
    assert!(!gives_back(&c, Moment::Head(403)));
    for s in [200, 204, 302, 400, 404, 429, 500, 503] {
        assert!(gives_back(&c, Moment::Head(s)), "{s}");
    }
}

#[test]
fn a_client_gone_before_the_answer_keeps_its_attempt_counted() {
    assert!(!gives_back(&login(), GONE));
    let r = RefundOn {
        client_gone_before_response: true,
        ..RefundOn::default()
    };
    assert!(gives_back(&refunds(r), GONE));
    let mut c = login();
    c.refund_on = r;
    assert!(gives_back(&c, GONE));
}

#[test]
fn tollgates_own_answer_counts_by_its_status() {
    let mut c = login();
    assert!(gives_back(&c, unavailable(502)));
    c.status.as_mut().unwrap().insert_class(5);
    assert!(!gives_back(&c, unavailable(502)));
    // Nothing written: nothing to judge by, the debit stands.
    assert!(!gives_back(&c, unavailable(0)));
}

#[test]
fn refund_on_names_its_outcomes_only() {
    let r = RefundOn {
        backend_5xx: true,
        ..RefundOn::default()
    };
    let c = refunds(r);
    assert!(gives_back(&c, Moment::Head(503)));
    assert!(gives_back(&c, Moment::Head(500)));
    assert!(!gives_back(&c, Moment::Head(200)));
    assert!(!gives_back(&c, Moment::Head(404)));
    assert!(!gives_back(&c, unavailable(502)));
    assert!(!gives_back(&c, GONE));
    let c = refunds(RefundOn {
        upstream_unavailable: true,
        ..RefundOn::default()
    });
    assert!(gives_back(&c, unavailable(502)));
    assert!(!gives_back(&c, Moment::Head(503)));
    let both = r.union(c.refund_on);
    assert!(both.backend_5xx && both.upstream_unavailable && !both.client_gone_before_response);
}

#[test]
fn nothing_held_settles_nothing() {
    let mut s = Settle::default();
    assert!(s.is_empty());
    s.finish(200, false, false);
    assert!(s.is_empty());
}
