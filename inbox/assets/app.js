// sandboxflow reviewers' inbox: passkey registration, sign-in and signed decisions, and the
// pending list's refresh. Plain JavaScript, no dependencies; the page works without it except
// for what needs a passkey.
'use strict';
(function () {
  function csrf() {
    var m = document.querySelector('meta[name="csrf-token"]');
    return m ? m.content : '';
  }
  function enc(buf) {
    var bytes = new Uint8Array(buf), s = '';
    for (var i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
    return btoa(s).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  }
  function dec(s) {
    s = s.replace(/-/g, '+').replace(/_/g, '/');
    while (s.length % 4) s += '=';
    var bin = atob(s), out = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
    return out;
  }
  async function post(url, body) {
    var r = await fetch(url, {
      method: 'POST',
      credentials: 'same-origin',
      headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf() },
      body: JSON.stringify(body)
    });
    var text = await r.text(), data = {};
    try { data = JSON.parse(text); } catch (e) { /* not JSON: the text says why */ }
    if (!r.ok) throw new Error(data.error || text.trim() || ('HTTP ' + r.status + ' (the inbox gave no reason)'));
    return data;
  }
  // wrongOrigin says why a passkey cannot be used on this page, or '' when it can: a passkey is
  // bound to the inbox's configured origin, and a browser at another (127.0.0.1 for localhost)
  // would refuse the ceremony with no reason given.
  function wrongOrigin() {
    var m = document.querySelector('meta[name="inbox-origin"]');
    if (!m || !m.content || m.content === location.origin) return '';
    return 'Open the inbox at ' + m.content + ': this page is at ' + location.origin +
      ', and the inbox\'s passkeys belong to ' + m.content + ' only (127.0.0.1 and localhost are different origins).';
  }
  function showOrigin() {
    var why = wrongOrigin(), el = document.getElementById('origin-msg');
    if (!why || !el) return;
    el.textContent = why + ' ';
    var a = document.createElement('a');
    a.href = document.querySelector('meta[name="inbox-origin"]').content + location.pathname;
    a.textContent = 'Go there';
    a.id = 'origin-link';
    el.append(a);
    el.hidden = false;
  }
  function say(id, text, kind) {
    var el = document.getElementById(id);
    if (!el) return;
    el.textContent = text;
    el.className = 'msg' + (kind ? ' ' + kind : '');
    // What the Decide card says, the decision bar says too: it is the part in view.
    if (id === 'decide-msg') say('bar-msg', text, kind);
  }
  function assertion(cred) {
    var r = cred.response;
    return {
      credential_id: enc(cred.rawId),
      authenticator_data: enc(r.authenticatorData),
      client_data_json: enc(r.clientDataJSON),
      signature: enc(r.signature),
      user_handle: r.userHandle ? enc(r.userHandle) : ''
    };
  }

  async function register(ev) {
    ev.preventDefault();
    var name = document.getElementById('register-name').value.trim();
    if (wrongOrigin()) { say('register-msg', 'Registration refused: ' + wrongOrigin(), 'error'); return; }
    say('register-msg', 'Follow your browser to create the passkey…');
    try {
      var o = await post('/passkey/register/begin', { name: name });
      var pk = Object.assign({}, o, {
        challenge: dec(o.challenge),
        user: Object.assign({}, o.user, { id: dec(o.user.id) })
      });
      var cred = await navigator.credentials.create({ publicKey: pk });
      var res = await post('/passkey/register/finish', {
        id: cred.id, rawId: enc(cred.rawId), type: cred.type,
        response: {
          clientDataJSON: enc(cred.response.clientDataJSON),
          attestationObject: enc(cred.response.attestationObject),
          transports: cred.response.getTransports ? cred.response.getTransports() : []
        },
        clientExtensionResults: cred.getClientExtensionResults ? cred.getClientExtensionResults() : {}
      });
      document.getElementById('register-line').textContent = res.line;
      document.getElementById('register-result').hidden = false;
      say('register-msg', 'Passkey created. It gives no access until its line is in ' + res.reviewers + '.', 'ok');
      say('register-warning', res.warning || '', res.warning ? 'error' : '');
      document.getElementById('register-line').focus();
    } catch (e) {
      say('register-msg', 'Registration failed: ' + e.message, 'error');
    }
  }

  async function signIn() {
    if (wrongOrigin()) { say('signin-msg', 'Sign-in refused: ' + wrongOrigin(), 'error'); return; }
    say('signin-msg', 'Follow your browser to use your passkey…');
    try {
      var o = await post('/passkey/login/begin', {});
      var cred = await navigator.credentials.get({ publicKey: {
        challenge: dec(o.challenge), rpId: o.rpId, userVerification: 'required', timeout: o.timeout
      } });
      await post('/passkey/login/finish', assertion(cred));
      say('signin-msg', 'Signed in.', 'ok');
      location.assign('/');
    } catch (e) {
      say('signin-msg', 'Sign-in failed: ' + e.message, 'error');
    }
  }

  // decide signs this page's approve or deny statement with the reviewer's passkey and sends it.
  // Then the page goes to the next waiting run (from the decision bar or the Decide card alike),
  // where a note links back to this one for its outcome (moveOn).
  var deciding = false;
  async function decide(approve, fromBar) {
    if (deciding) return;
    var box = document.getElementById('decide');
    var pre = document.getElementById(approve ? 'statement-approve' : 'statement-deny');
    if (!box || !pre) return;
    var reasonEl = document.getElementById(fromBar ? 'bar-reason' : 'deny-reason');
    var reason = approve ? '' : reasonEl.value.trim();
    if (!approve && !reason) {
      say('decide-msg', 'A denial needs a reason.', 'error');
      reasonEl.focus();
      return;
    }
    if (wrongOrigin()) { say('decide-msg', 'Nothing signed: ' + wrongOrigin(), 'error'); return; }
    var statement = pre.textContent;
    deciding = true;
    say('decide-msg', 'Follow your browser to sign with your passkey…');
    try {
      var digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(statement));
      var allow = box.dataset.credential ? [{ type: 'public-key', id: dec(box.dataset.credential) }] : [];
      var cred = await navigator.credentials.get({ publicKey: {
        challenge: new Uint8Array(digest), rpId: location.hostname, allowCredentials: allow,
        userVerification: 'required', timeout: 120000
      } });
      var body = {
        approve: approve, approval_id: pre.dataset.approvalId, expires: pre.dataset.expires,
        statement: statement, reason: reason, webauthn: assertion(cred)
      };
      // A session's cell: the cell and the digest this page showed, so that a decision made on
      // a page read before a newer cell came is refused.
      if (box.dataset.cell) { body.cell = Number(box.dataset.cell); body.digest = box.dataset.digest; }
      var res = await post(location.pathname.replace(/\/$/, '') + '/decide', body);
      var count = res.quorum ? ' (' + res.approvals + ' of ' + res.quorum + ' approvals' +
        (res.state === 'awaiting_approval' ? '; another reviewer must approve' : '') + ')' : '';
      say('decide-msg', 'Decision accepted: ' + (approve ? 'approved' : 'denied') + ' by ' + res.reviewer + count + '.' +
        ' Going to the next waiting run…', 'ok');
      moveOn((approve ? 'Approved' : 'Denied') + ' ' + decidedName() + '.');
    } catch (e) {
      deciding = false;
      say('decide-msg', e.message, 'error');
    }
  }

  // decidedKey is where the page that moves on after a decision leaves the note for the next
  // page (this tab's session storage: same origin, this tab only).
  var decidedKey = 'sandboxflow-decided';

  // decidedName names what this page decided: the run, or the session's cell.
  function decidedName() {
    var box = document.getElementById('decide');
    var id = decodeURIComponent(location.pathname.replace(/\/$/, '').split('/').pop());
    return box && box.dataset.cell ? 'cell ' + box.dataset.cell + ' of session ' + id : 'run ' + id;
  }

  // moveOn goes to the next waiting run or cell after a decision, leaving a note (what) with
  // the way back to this page, where its outcome shows.
  function moveOn(what) {
    try { sessionStorage.setItem(decidedKey, JSON.stringify({ path: location.pathname, what: what })); } catch (e) { /* no note */ }
    setTimeout(function () { location.assign(nextURL()); }, 400);
  }

  // decidedNote shows, once, the note moveOn left: what was decided and a link back to it. The
  // link is only ever a run's or a session's page of this inbox.
  function decidedNote() {
    var d = null;
    try {
      d = JSON.parse(sessionStorage.getItem(decidedKey) || 'null');
      sessionStorage.removeItem(decidedKey);
    } catch (e) { return; }
    if (!d || typeof d.path !== 'string' || typeof d.what !== 'string' || !/^\/(run|session)\/[^/]+$/.test(d.path)) return;
    var main = document.getElementById('main');
    if (!main) return;
    var p = document.createElement('p');
    p.id = 'decided';
    p.className = 'msg ok';
    p.setAttribute('role', 'status');
    p.textContent = d.what + ' ';
    var a = document.createElement('a');
    a.id = 'decided-link';
    a.href = d.path;
    a.textContent = 'See its outcome';
    p.appendChild(a);
    main.insertBefore(p, main.firstChild);
  }

  // nextURL is where the next waiting run (or cell) is: the server picks it from the pending
  // list, after this page's run and never this one; the list when none waits.
  function nextURL() {
    return '/next?from=' + encodeURIComponent(location.pathname);
  }

  // typing says the key went to a field the reviewer writes in: no shortcut fires there.
  function typing(t) {
    return !!t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName));
  }

  // decisionBar wires the bar that stays in view and its keys: a approves, d goes to the reason
  // (Enter denies, Esc leaves it), j or n goes to the next waiting run. The two reason fields
  // (bar and Decide card) hold the same text.
  function decisionBar() {
    var bar = document.getElementById('decision-bar');
    if (!bar) return;
    var next = document.getElementById('bar-next');
    next.href = nextURL();
    // What is scrolled into view (a field tabbed to, a link to a card) stops above the bar.
    function pad() { document.documentElement.style.scrollPaddingBottom = (bar.offsetHeight + 8) + 'px'; }
    pad();
    window.addEventListener('resize', pad);
    var approve = document.getElementById('bar-approve');
    if (approve) approve.addEventListener('click', function () { decide(true, true); });
    var reason = document.getElementById('bar-reason'), card = document.getElementById('deny-reason');
    var deny = document.getElementById('bar-deny');
    if (deny) deny.addEventListener('click', function () { decide(false, true); });
    if (reason && card) {
      reason.addEventListener('input', function () { card.value = reason.value; });
      card.addEventListener('input', function () { reason.value = card.value; });
    }
    if (reason) {
      reason.addEventListener('keydown', function (ev) {
        if (ev.key === 'Enter') { ev.preventDefault(); decide(false, true); }
        if (ev.key === 'Escape') reason.blur();
      });
    }
    document.addEventListener('keydown', function (ev) {
      if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || ev.isComposing || typing(ev.target)) return;
      if (ev.key === 'a' && approve) { ev.preventDefault(); decide(true, true); }
      if (ev.key === 'd' && reason) ev.preventDefault();
      if (ev.key === 'j' || ev.key === 'n') { ev.preventDefault(); location.assign(nextURL()); }
    });
    // d moves to the reason once the key is up, so its own letter is not typed into it.
    document.addEventListener('keyup', function (ev) {
      if (ev.key !== 'd' || !reason || ev.ctrlKey || ev.metaKey || ev.altKey || typing(ev.target)) return;
      reason.focus();
    });
  }

  // cancelRun posts the reviewer's cancel of this run (a fetch: it carries the page's origin and
  // CSRF token, which the server checks as for a decision) and shows the run as it ends.
  async function cancelRun(ev) {
    ev.preventDefault();
    say('cancel-msg', 'Cancelling…');
    try {
      var res = await post(location.pathname.replace(/\/$/, '') + '/cancel', { reason: document.getElementById('cancel-reason').value.trim() });
      say('cancel-msg', 'Cancelled by ' + res.by + ' (the run was ' + res.state + ').', 'ok');
      setTimeout(function () { location.reload(); }, 800);
    } catch (e) {
      say('cancel-msg', e.message, 'error');
    }
  }

  // Approve with edits: the server builds the statement of the edited code (its digest is
  // the edited request's), the passkey signs it, and decide sends it with the edit.
  var edited = null;
  async function prepareEdit() {
    var ta = document.getElementById('edit-code');
    // A statement shown for other code must not be signed: hide it until the new one is in.
    edited = null;
    document.getElementById('statement-edit').hidden = true;
    document.getElementById('edit-approve').hidden = true;
    say('decide-msg', 'Building the statement of the edited code…');
    try {
      var path = location.pathname.replace(/\/$/, '');
      edited = await post(path + '/edit-statement', { code: ta.value, digest: ta.dataset.digest });
      edited.code = ta.value;
      var pre = document.getElementById('statement-edit');
      pre.textContent = edited.statement;
      pre.hidden = false;
      document.getElementById('edit-approve').hidden = false;
      say('decide-msg', 'Read the statement: it names the edited digest ' + edited.digest + '.', 'ok');
    } catch (e) {
      edited = null;
      say('decide-msg', e.message, 'error');
    }
  }
  async function approveEdit() {
    var box = document.getElementById('decide');
    var ta = document.getElementById('edit-code');
    if (!edited || edited.code !== ta.value) {
      say('decide-msg', 'The code changed since its statement was shown: show it again.', 'error');
      return;
    }
    say('decide-msg', 'Follow your browser to sign with your passkey…');
    try {
      var digest = await crypto.subtle.digest('SHA-256', new TextEncoder().encode(edited.statement));
      var allow = box.dataset.credential ? [{ type: 'public-key', id: dec(box.dataset.credential) }] : [];
      var cred = await navigator.credentials.get({ publicKey: {
        challenge: new Uint8Array(digest), rpId: location.hostname, allowCredentials: allow,
        userVerification: 'required', timeout: 120000
      } });
      var res = await post(location.pathname.replace(/\/$/, '') + '/decide', {
        approve: true, approval_id: edited.approval_id, expires: edited.expires, statement: edited.statement,
        reason: '', webauthn: assertion(cred), edit: { code: edited.code, original_digest: ta.dataset.digest }
      });
      say('decide-msg', 'Edited code approved by ' + res.reviewer + ' (digest ' + res.digest + '). Going to the next waiting run…', 'ok');
      moveOn('Approved ' + decidedName() + ' as edited.');
    } catch (e) {
      say('decide-msg', e.message, 'error');
    }
  }

  function refreshList() {
    var body = document.getElementById('pending-rows');
    if (!body) return;
    setInterval(async function () {
      try {
        var r = await fetch('/pending', { credentials: 'same-origin' });
        if (r.status === 401) { location.assign('/signin'); return; }
        if (!r.ok) return;
        body.innerHTML = await r.text(); // server-rendered, escaped by html/template
        say('refreshed', 'Updated ' + new Date().toLocaleTimeString() + '.');
      } catch (e) { /* offline: try again */ }
    }, 5000);
  }

  // followLive appends a running run's (or session cell's) output as text (never HTML) until the
  // code ends, then reloads the page for the result.
  function followLive(box) {
    var cur = { activity: '', stdout: 0, stderr: 0 };
    var pre = { stdout: document.getElementById('live-stdout'), stderr: document.getElementById('live-stderr') };
    async function poll() {
      try {
        var q = 'activity=' + encodeURIComponent(cur.activity) + '&stdout=' + cur.stdout + '&stderr=' + cur.stderr;
        var url = box.dataset.run ? '/run/' + encodeURIComponent(box.dataset.run) + '/live?' + q
          : '/session/' + encodeURIComponent(box.dataset.session) + '/live?cell=' + Number(box.dataset.cell) + '&' + q;
        var r = await fetch(url, { credentials: 'same-origin', headers: { 'X-CSRF-Token': csrf() } });
        if (r.status === 401) { location.assign('/signin'); return; }
        if (r.ok) {
          var a = await r.json();
          if (a.activity !== cur.activity) { pre.stdout.textContent = ''; pre.stderr.textContent = ''; }
          a.chunks.forEach(function (c) {
            var el = pre[c.stream];
            if (!el) return;
            if (c.skipped) el.append(document.createTextNode('\n[' + c.skipped + ' bytes skipped]\n'));
            el.append(document.createTextNode(c.text));
          });
          cur = { activity: a.activity, stdout: a.stdout, stderr: a.stderr };
          if (!a.running) { setTimeout(function () { location.reload(); }, 1000); return; }
        }
      } catch (e) { /* offline: try again */ }
      setTimeout(poll, 300);
    }
    poll();
  }

  function refreshRunning() {
    var st = document.getElementById('run-state');
    var ss = document.getElementById('session-state');
    var live = document.getElementById('live');
    if (live && (st && st.dataset.state === 'running' || ss && ss.dataset.busy === 'true')) {
      followLive(live);
      return;
    }
    if (st && (st.dataset.state === 'running' || st.dataset.state === 'checking') || ss && ss.dataset.busy === 'true') {
      setTimeout(function again() {
        // Not while the reviewer writes a reason to cancel: the reload would drop it.
        var reason = document.getElementById('cancel-reason');
        if (reason && (reason.value !== '' || document.activeElement === reason)) { setTimeout(again, 2000); return; }
        location.reload();
      }, 2000);
    }
  }

  // listKeys: on the pending list, j or n opens the first waiting run.
  function listKeys() {
    if (!document.getElementById('list-next')) return;
    document.addEventListener('keydown', function (ev) {
      if (ev.defaultPrevented || ev.ctrlKey || ev.metaKey || ev.altKey || ev.isComposing || typing(ev.target)) return;
      if (ev.key === 'j' || ev.key === 'n') { ev.preventDefault(); location.assign('/next'); }
    });
  }

  document.addEventListener('DOMContentLoaded', function () {
    var f = document.getElementById('register-form');
    if (f) f.addEventListener('submit', register);
    var b = document.getElementById('signin');
    if (b) b.addEventListener('click', signIn);
    var a = document.getElementById('approve');
    if (a) a.addEventListener('click', function () { decide(true); });
    var d = document.getElementById('deny');
    if (d) d.addEventListener('click', function () { decide(false); });
    var cf = document.getElementById('cancel-form');
    if (cf) cf.addEventListener('submit', cancelRun);
    var ep = document.getElementById('edit-prepare');
    if (ep) ep.addEventListener('click', prepareEdit);
    var ea = document.getElementById('edit-approve');
    if (ea) ea.addEventListener('click', approveEdit);
    decisionBar();
    decidedNote();
    listKeys();
    showOrigin();
    refreshList();
    refreshRunning();
  });
})();
