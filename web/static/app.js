// Mailroom live status page.
//
// Rules this file keeps:
// - Every string that comes from the API is put into the page with
//   textContent or createTextNode, never as markup, so a letter body such as
//   <img src=x onerror=...> shows up literally.
// - The admin token lives in sessionStorage and travels only in the
//   Authorization header; it is removed from the address bar on load.
// - No inline code or styles: the page runs under a strict CSP.
'use strict';

(function () {
  const API = 'api/v1';
  const TOKEN_KEY = 'mailroom.token';
  const WOKEN_KEY = 'mailroom.wokenBy';
  const RECENT_TURNS = 3;
  const PROTOCOL_PREFIX = '[team-protocol] ';
  const PROTOCOL_TYPES = ['plan_request', 'shutdown_request', 'plan_response', 'shutdown_response'];
  const TEAM_POLL_MS = 4000;
  const RUN_POLL_MS = 300;
  const REFRESH_DEBOUNCE_MS = 100;
  // A member counts as using MCP for this long after its last request
  // (mcp_last_seen); badges are checked this often.
  const MCP_SEEN_MS = 60000;
  const MCP_CHECK_MS = 1000;
  // How many letters a search lists, best first (the API's default).
  const SEARCH_LIMIT = 20;

  const STATUS_ICONS = { idle: '○', running: '▶', stopped: '■', failed: '✖', closed: '⊘' };
  const REQUEST_STATES = {
    pending: { icon: '◷', text: 'pending' },
    replied: { icon: '✉', text: 'reply sent — not yet matched' },
    approved: { icon: '✔', text: 'approved' },
    rejected: { icon: '✖', text: 'rejected' },
  };
  const LIVE_STATES = {
    off: { icon: '○', text: 'offline' },
    connecting: { icon: '◌', text: 'connecting…' },
    live: { icon: '●', text: 'live' },
    reconnecting: { icon: '↻', text: 'reconnecting…' },
  };

  const state = {
    token: '',
    teams: [],
    selected: '',
    live: null, // AbortController of the event stream
    teamPoll: 0,
    seen: new Set(), // team/member/letter ids already shown once
    thread: null, // { team, id } of the thread shown, or null
    requestStates: new Map(), // team/request id -> last rendered state
    renderedTeam: '',
    running: false,
    model: null, // { view, inboxes } of the selected team as last rendered
    eventSeq: 0, // counts applied events, to drop refetches they overtook
    doing: new Map(), // team/member -> what the member's turn is doing, from turn events
    wokenBy: new Map(), // team/member -> the letters that woke its current or last turn
    turns: new Map(), // team/member -> its newest turn documents, newest first
    searchSeq: 0, // counts searches, so that only the last one's answer is shown
  };

  const $ = (id) => document.getElementById(id);

  // "woken by" is kept in sessionStorage, so a reload shows it at once;
  // the team's turn documents (refresh) confirm it from the server.
  function loadWokenBy() {
    try {
      const saved = JSON.parse(sessionStorage.getItem(WOKEN_KEY) || '{}');
      for (const [k, v] of Object.entries(saved)) if (typeof v === 'string') state.wokenBy.set(k, v);
    } catch (_) { /* nothing kept */ }
  }

  function setWokenBy(key, value) {
    if (value) state.wokenBy.set(key, value);
    else state.wokenBy.delete(key);
    try {
      sessionStorage.setItem(WOKEN_KEY, JSON.stringify(Object.fromEntries(state.wokenBy)));
    } catch (_) { /* storage full or off: the turns still tell */ }
  }

  // triggerText is what woke a turn: its letters or its task, '' for a
  // turn someone asked for.
  function triggerText(trigger) {
    if (!trigger || typeof trigger !== 'object') return '';
    if (trigger.kind === 'mail' && Array.isArray(trigger.letters)) return trigger.letters.map(String).join(', ');
    if (trigger.kind === 'task' && typeof trigger.task_id === 'string') return trigger.task_id;
    return '';
  }

  // el builds an element. Children that are strings become text nodes, so
  // nothing passed here is ever parsed as HTML.
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    if (props) {
      for (const [k, v] of Object.entries(props)) {
        if (v === undefined || v === null || v === false) continue;
        if (k === 'class') node.className = v;
        else if (k === 'data') for (const [dk, dv] of Object.entries(v)) node.dataset[dk] = String(dv);
        else if (k === 'text') node.textContent = String(v);
        else node.setAttribute(k, v === true ? '' : String(v));
      }
    }
    for (const c of children) {
      if (c === undefined || c === null || c === false) continue;
      node.append(typeof c === 'string' || typeof c === 'number' ? document.createTextNode(String(c)) : c);
    }
    return node;
  }

  function icon(symbol) {
    return el('span', { class: 'icon', 'aria-hidden': 'true' }, symbol);
  }

  // ---------- errors and status line ----------

  class ApiError extends Error {
    constructor(status, problem) {
      const code = (problem && problem.code) || 'http_' + status;
      const detail = (problem && (problem.detail || problem.title)) || 'request failed';
      super(code + ': ' + detail);
      this.status = status;
      this.code = code;
      this.detail = detail;
    }
  }

  function showStatus(message) {
    $('status-text').textContent = message;
    $('status-line').hidden = false;
  }

  function clearStatus() {
    $('status-line').hidden = true;
    $('status-text').textContent = '';
  }

  function report(err, what) {
    if (err && err.name === 'AbortError') return;
    if (err instanceof ApiError && err.status === 401) {
      unauthorized();
      return;
    }
    const msg = err instanceof ApiError ? err.message + ' (HTTP ' + err.status + ')' : String((err && err.message) || err);
    showStatus((what ? what + ' — ' : '') + msg);
  }

  // ---------- API ----------

  async function api(method, path, body, signal) {
    const headers = { Authorization: 'Bearer ' + state.token, Accept: 'application/json' };
    const init = { method, headers, cache: 'no-store', signal };
    if (body !== undefined) {
      headers['Content-Type'] = 'application/json';
      init.body = JSON.stringify(body);
    }
    const res = await fetch(API + path, init);
    const text = await res.text();
    let data = null;
    if (text) {
      try {
        data = JSON.parse(text);
      } catch (_) {
        data = null;
      }
    }
    if (!res.ok) throw new ApiError(res.status, data);
    return data;
  }

  const enc = encodeURIComponent;

  // ---------- token ----------

  function readToken() {
    const hash = window.location.hash.replace(/^#/, '');
    if (hash) {
      const params = new URLSearchParams(hash);
      const t = params.get('token');
      if (t) {
        sessionStorage.setItem(TOKEN_KEY, t.trim());
        // Remove the token from the address bar and the history entry.
        history.replaceState(null, '', window.location.pathname + window.location.search);
      }
    }
    return sessionStorage.getItem(TOKEN_KEY) || '';
  }

  function showTokenPanel() {
    stopLive();
    if (state.teamPoll) clearInterval(state.teamPoll);
    state.teamPoll = 0;
    $('app').hidden = true;
    $('picker').hidden = true;
    $('forget').hidden = true;
    $('token-panel').hidden = false;
    setLive('off');
    $('token-input').focus();
  }

  function unauthorized() {
    sessionStorage.removeItem(TOKEN_KEY);
    state.token = '';
    showTokenPanel();
    showStatus('unauthorized: the token was not accepted. Paste the admin token the server printed.');
  }

  // ---------- live indicator and event stream ----------

  function setLive(kind) {
    const s = LIVE_STATES[kind];
    const node = $('live');
    node.dataset.live = kind;
    node.querySelector('.live-icon').textContent = s.icon;
    node.querySelector('.live-text').textContent = s.text;
  }

  function stopLive() {
    if (state.live) state.live.abort();
    state.live = null;
  }

  function sleep(ms, signal) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      signal.addEventListener('abort', () => {
        clearTimeout(t);
        resolve();
      }, { once: true });
    });
  }

  // follow keeps one event stream open for the selected team, reconnecting
  // with backoff after a drop or a resync event; each (re)connect refetches
  // because events may have been missed meanwhile.
  async function follow(team, ctrl) {
    let delay = 500;
    setLive('connecting');
    while (!ctrl.signal.aborted) {
      try {
        await stream(team, ctrl.signal, () => {
          delay = 500;
          setLive('live');
          if (team) scheduleRefresh(0);
          else loadTeams().catch((err) => report(err, 'team list'));
        });
      } catch (err) {
        if (ctrl.signal.aborted) return;
        if (err instanceof ApiError && err.status === 401) {
          unauthorized();
          return;
        }
        if (err instanceof ApiError) report(err, 'event stream');
      }
      if (ctrl.signal.aborted) return;
      setLive('reconnecting');
      await sleep(delay + Math.floor(Math.random() * 250), ctrl.signal);
      delay = Math.min(delay * 2, 10000);
    }
  }

  // stream reads one Server-Sent Events response with fetch (EventSource
  // cannot send the Authorization header) and returns when it ends or when
  // the server asks for a resync.
  async function stream(team, signal, onOpen, handle = onEvent) {
    // No team yet: the admin's stream of every team, to notice the first.
    const res = await fetch(API + '/events' + (team ? '?team=' + enc(team) : ''), {
      headers: { Authorization: 'Bearer ' + state.token, Accept: 'text/event-stream' },
      cache: 'no-store',
      signal,
    });
    if (!res.ok) {
      let problem = null;
      try {
        problem = await res.json();
      } catch (_) {
        problem = null;
      }
      throw new ApiError(res.status, problem);
    }
    onOpen();
    const reader = res.body.getReader();
    const decoder = new TextDecoder();
    let buf = '';
    let type = '';
    let data = [];
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) return;
        buf += decoder.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf('\n')) >= 0) {
          let line = buf.slice(0, i);
          buf = buf.slice(i + 1);
          if (line.endsWith('\r')) line = line.slice(0, -1);
          if (line === '') {
            if (type || data.length) {
              if (handle(type || 'message', data.join('\n'), team) === 'resync') return;
            }
            type = '';
            data = [];
          } else if (line.startsWith(':')) {
            // comment / keep-alive
          } else {
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            let val = colon < 0 ? '' : line.slice(colon + 1);
            if (val.startsWith(' ')) val = val.slice(1);
            if (field === 'event') type = val;
            else if (field === 'data') data.push(val);
          }
        }
      }
    } finally {
      reader.cancel().catch(() => {});
    }
  }

  function onEvent(type, raw, team) {
    if (team !== state.selected) return '';
    if (type === 'resync') {
      scheduleRefresh(0);
      return 'resync';
    }
    let ev = null;
    try {
      ev = JSON.parse(raw);
    } catch (_) {
      ev = null;
    }
    if (!team || type === 'run') loadTeams().catch((err) => report(err, 'team list'));
    if (!team || (ev && typeof ev.team === 'string' && ev.team !== team)) return '';
    // Show the change at once from the event's own object, so every step
    // is visible even when steps come faster than a refetch; the refetch
    // that follows makes the whole view consistent again.
    state.eventSeq++;
    if (ev && state.model && state.model.view.name === team && applyEvent(state.model, type, ev.data)) {
      renderTeam(state.model.view, state.model.inboxes);
    }
    scheduleRefresh(REFRESH_DEBOUNCE_MS);
    return '';
  }

  // applyEvent folds one event's object into the model and reports whether
  // anything changed. Unknown shapes are left to the refetch.
  function applyEvent(model, type, data) {
    if (!data || typeof data !== 'object') return false;
    const view = model.view;
    if (!Array.isArray(view.members)) view.members = [];
    if (!Array.isArray(view.requests)) view.requests = [];
    switch (type) {
      case 'message': {
        const i = view.members.findIndex((m) => m.name === data.recipient);
        const box = model.inboxes[i];
        if (i < 0 || !box || !box.messages || box.messages.some((m) => m.id === data.id)) return false;
        // Only the letter right after the last one shown: a model fetched
        // before an earlier letter arrived lacks it, and showing this one
        // alone would hide it until the refetch (which shows them all).
        // Archived letters keep their numbers (docs/api.md, L): every letter
        // the member received is archived or shown, so after an archive
        // that emptied the inbox the next letter follows the archived ones.
        const shown = box.messages.length ? letterPosition(box.messages[box.messages.length - 1].id) : 0;
        const last = Math.max(shown, Math.max(Number(view.members[i].archived) || 0, 0) + box.messages.length);
        if (letterPosition(data.id) !== last + 1) return false;
        box.messages.push(data);
        view.members[i].inbox_length = box.messages.length;
        return true;
      }
      case 'ack': {
        if (typeof data.id !== 'string') return false;
        if (!model.acks) model.acks = {};
        model.acks[data.id] = { outcome: data.outcome, note: data.note, at: data.at };
        return true;
      }
      case 'request':
      case 'reply':
      case 'match': {
        if (typeof data.request_id !== 'string') return false;
        const i = view.requests.findIndex((r) => r.request_id === data.request_id);
        if (i >= 0) view.requests[i] = data;
        else view.requests.push(data);
        return true;
      }
      case 'permission': {
        if (typeof data.permission_id !== 'string') return false;
        if (!Array.isArray(model.permissions)) model.permissions = [];
        const i = model.permissions.findIndex((p) => p.permission_id === data.permission_id);
        if (i >= 0) model.permissions[i] = data;
        else model.permissions.push(data);
        return true;
      }
      case 'reservation': {
        if (typeof data.reservation_id !== 'string') return false;
        if (!Array.isArray(model.reservations)) model.reservations = [];
        const i = model.reservations.findIndex((x) => x.reservation_id === data.reservation_id);
        if (i >= 0) model.reservations[i] = data;
        else model.reservations.push(data);
        return true;
      }
      case 'task': {
        if (typeof data.task_id !== 'string') return false;
        if (!Array.isArray(model.tasks)) model.tasks = [];
        const i = model.tasks.findIndex((x) => x.task_id === data.task_id);
        if (i >= 0) model.tasks[i] = data;
        else model.tasks.push(data);
        return true;
      }
      case 'turn': {
        if (typeof data.member !== 'string' || typeof data.status !== 'string') return false;
        state.doing.set(view.name + '/' + data.member, turnActivity(data));
        // A turn's start and end carry its trigger; a woken turn names
        // the letters or the task that woke it (docs/api.md, E, G).
        const trigger = data.trigger;
        if (trigger && typeof trigger === 'object') setWokenBy(view.name + '/' + data.member, triggerText(trigger));
        return true;
      }
      case 'member': {
        let changed = false;
        for (const m of Array.isArray(data) ? data : [data]) {
          const i = view.members.findIndex((x) => x.name === m.name);
          if (i >= 0 && m && typeof m.status === 'string') {
            view.members[i] = m;
            changed = true;
          }
        }
        return changed;
      }
      default:
        return false;
    }
  }

  // turnActivity says in a few words what a turn is doing after one of
  // its events: a running turn's next step follows from the last one (a
  // model answer asking for tools means tools run next), an ended turn
  // shows how it ended.
  function turnActivity(ev) {
    if (ev.status !== 'running') return 'last turn ' + ev.status.replace('_', ' ');
    const step = ev.step;
    if (!step || typeof step !== 'object') return 'asking the model';
    switch (step.kind) {
      case 'model_request':
        if (step.error) return 'model request failed (' + step.error + ')';
        return step.stop_reason === 'tool_use' ? 'calling tools' : 'answering';
      case 'tool_call': {
        let arg = '';
        try {
          const input = JSON.parse(step.input || '{}');
          arg = input.path || (input.to ? 'to ' + input.to : '') || input.request_id || '';
        } catch (_) {
          arg = '';
        }
        return String(step.tool || 'tool') + (arg ? ' ' + String(arg) : '') + (step.is_error ? ' (refused)' : '');
      }
      case 'permission':
        return step.status === 'pending' ? 'waiting for permission' : 'permission ' + String(step.status);
      default:
        return 'working';
    }
  }

  // tokens shows a usage object as "N in · M out".
  function tokens(u) {
    if (!u || typeof u !== 'object') return '0';
    return Number(u.input_tokens || 0).toLocaleString() + ' in · ' + Number(u.output_tokens || 0).toLocaleString() + ' out';
  }

  // ---------- teams ----------

  async function loadTeams() {
    const doc = await api('GET', '/teams');
    const teams = (doc && Array.isArray(doc.teams)) ? doc.teams : [];
    const before = state.teams.map((t) => t.name).join('\n');
    state.teams = teams;
    if (teams.map((t) => t.name).join('\n') !== before) renderTeamOptions();
    const newest = teams.length ? teams[0].name : '';
    if (newest && (!state.selected || ($('follow').checked && newest !== state.selected))) {
      selectTeam(newest);
    }
    $('team-empty').hidden = teams.length > 0;
    if (!teams.length && !state.selected) {
      // The first data is in: "Loading…" gives way to what is true.
      $('team-title').textContent = 'No team yet';
      delete $('team-title').dataset.loading;
    }
    if (!state.selected && !state.live) watch('');
    return teams;
  }

  function renderTeamOptions() {
    const sel = $('team-select');
    const opts = state.teams.map((t) => {
      const when = t.created_at ? new Date(t.created_at) : null;
      const label = t.name + ' · ' + t.members + ' members' +
        (when && !isNaN(when) ? ' · ' + when.toLocaleTimeString() : '');
      return el('option', { value: t.name }, label);
    });
    if (!opts.length) opts.push(el('option', { value: '' }, 'no teams yet'));
    sel.replaceChildren(...opts);
    sel.value = state.selected;
  }

  function selectTeam(name) {
    if (!name) return;
    const changed = name !== state.selected;
    state.selected = name;
    if (changed) {
      closeThread();
      clearSearch();
    }
    $('team-select').value = name;
    if (!changed && state.live) return;
    watch(name);
    scheduleRefresh(0);
  }

  // watch replaces the event stream with one for team ('' = every team).
  function watch(team) {
    stopLive();
    const ctrl = new AbortController();
    state.live = ctrl;
    follow(team, ctrl);
  }

  // ---------- refresh and render ----------

  let refreshTimer = 0;
  let refreshing = false;
  let refreshAgain = false;

  function scheduleRefresh(ms) {
    if (refreshTimer) return;
    refreshTimer = setTimeout(() => {
      refreshTimer = 0;
      refresh();
    }, ms);
  }

  async function refresh() {
    if (refreshing) {
      refreshAgain = true;
      return;
    }
    refreshing = true;
    try {
      const team = state.selected;
      if (!team) return;
      const seq = state.eventSeq;
      const view = await api('GET', '/teams/' + enc(team));
      const members = Array.isArray(view.members) ? view.members : [];
      const inboxes = await Promise.all(members.map((m) =>
        api('GET', '/teams/' + enc(team) + '/members/' + enc(m.name) + '/inbox')
          .then((d) => ({ messages: (d && Array.isArray(d.messages)) ? d.messages : [] }))
          .catch((err) => {
            if (err instanceof ApiError && err.status === 401) throw err;
            return { error: err };
          })));
      // A team without a workspace never asks; a failure here must not
      // hide the rest of the team.
      const perms = await api('GET', '/teams/' + enc(team) + '/permissions')
        .then((d) => (d && Array.isArray(d.permissions)) ? d.permissions : [])
        .catch((err) => {
          if (err instanceof ApiError && err.status === 401) throw err;
          return [];
        });
      // The board: a failure here must not hide the rest of the team.
      const tasks = await api('GET', '/teams/' + enc(team) + '/tasks')
        .then((d) => (d && Array.isArray(d.tasks)) ? d.tasks : [])
        .catch((err) => {
          if (err instanceof ApiError && err.status === 401) throw err;
          return [];
        });
      // The live reservations: a failure here must not hide the rest.
      const reservations = await api('GET', '/teams/' + enc(team) + '/reservations')
        .then((d) => (d && Array.isArray(d.reservations)) ? d.reservations : [])
        .catch((err) => {
          if (err instanceof ApiError && err.status === 401) throw err;
          return [];
        });
      // The turn documents: each member's recent turns and what woke
      // the newest; a failure here must not hide the rest of the team.
      const turns = await api('GET', '/teams/' + enc(team) + '/turns')
        .then((d) => (d && Array.isArray(d.turns)) ? d.turns : [])
        .catch((err) => {
          if (err instanceof ApiError && err.status === 401) throw err;
          return null;
        });
      // The acknowledgements of the letters that asked for one; a
      // failure here must not hide the rest of the team.
      const acks = await loadAcks(team, inboxes);
      if (team !== state.selected) return; // the user moved on meanwhile
      if (turns) noteTurns(team, turns);
      // An event that arrived meanwhile is newer than this answer, and its
      // own refetch is already scheduled.
      if (seq !== state.eventSeq && state.model && state.model.view.name === team) return;
      state.model = { view, inboxes, permissions: perms, tasks, reservations, acks };
      renderTeam(view, inboxes);
      if (state.thread && state.thread.team === team) showThread(team, state.thread.id);
    } catch (err) {
      report(err, 'loading team');
    } finally {
      refreshing = false;
      if (refreshAgain) {
        refreshAgain = false;
        scheduleRefresh(0);
      }
    }
  }

  // noteTurns keeps each member's newest turns (the list is newest first)
  // and what woke the newest one.
  function noteTurns(team, turns) {
    const by = new Map();
    for (const t of turns) {
      if (!t || typeof t.member !== 'string') continue;
      const list = by.get(t.member) || [];
      if (list.length < RECENT_TURNS) list.push(t);
      by.set(t.member, list);
    }
    for (const [member, list] of by) {
      const key = team + '/' + member;
      state.turns.set(key, list);
      setWokenBy(key, triggerText(list[0].trigger));
    }
  }

  // resetMember asks the server to make a stopped or failed member idle
  // and to release a held wake (admin only).
  async function resetMember(team, member, button) {
    button.disabled = true;
    try {
      await api('POST', '/teams/' + enc(team) + '/members/' + enc(member) + '/reset');
      clearStatus();
    } catch (err) {
      report(err, 'reset ' + member);
    } finally {
      button.disabled = false;
      scheduleRefresh(0);
    }
  }

  // renderTurns lists a member's recent turns: id, how each ended, and
  // for one that did not end answered, why.
  function renderTurns(team, member) {
    const list = state.turns.get(team + '/' + member) || [];
    if (!list.length) return null;
    return el('ol', { class: 'turns', 'aria-label': 'Recent turns of ' + member },
      ...list.map((t) => {
        const status = String(t.status || 'unknown');
        const why = status !== 'answered' && status !== 'running' && t.text ? String(t.text) : '';
        const woke = triggerText(t.trigger);
        return el('li', { class: 'turn', data: { turnId: String(t.turn_id), outcome: status } },
          el('code', null, String(t.turn_id)), ' ',
          el('span', { class: 'turn-outcome' }, status.replace('_', ' ')),
          woke ? el('span', { class: 'muted' }, ' · woken by ' + woke) : null,
          why ? el('span', { class: 'turn-reason' }, ' — ' + why) : null);
      }));
  }

  function requestState(r) {
    if (r.status === 'approved') return 'approved';
    if (r.status === 'rejected') return 'rejected';
    if (r.reply) return 'replied';
    return 'pending';
  }

  function renderTeam(view, inboxes) {
    const firstLook = state.renderedTeam !== view.name;
    state.renderedTeam = view.name;
    const limits = view.limits || {};
    const members = Array.isArray(view.members) ? view.members : [];
    const requests = Array.isArray(view.requests) ? view.requests : [];

    $('team-title').textContent = 'Team ' + view.name;
    delete $('team-title').dataset.loading;
    const meta = [members.length + ' members'];
    if (limits.requests) meta.push('requests ' + requests.length + ' of ' + limits.requests + ' used');
    if (view.model && view.model.provider) meta.push('model ' + view.model.provider + (view.model.name ? ':' + view.model.name : ''));
    if (view.usage) {
      const spent = Number(view.usage.input_tokens || 0) + Number(view.usage.output_tokens || 0);
      meta.push('tokens ' + tokens(view.usage) + (limits.model_tokens ? ' (' + spent.toLocaleString() + ' of ' + Number(limits.model_tokens).toLocaleString() + ')' : ''));
    }
    if (view.created_at) {
      const d = new Date(view.created_at);
      if (!isNaN(d)) meta.push('created ' + d.toLocaleString());
    }
    $('team-meta').textContent = meta.join(' · ');
    $('team-empty').hidden = true;
    $('damaged').hidden = !view.damaged;

    $('members').dataset.team = view.name;
    $('members').replaceChildren(...members.map((m, i) => renderMember(view.name, m, inboxes[i], limits, firstLook)));

    renderPermissions(view.name, state.model && state.model.view === view ? state.model.permissions : []);

    renderBoard(state.model && state.model.view === view ? state.model.tasks : []);

    renderReservations(state.model && state.model.view === view ? state.model.reservations : []);

    const rows = requests.map((r) => renderRequest(view.name, r, firstLook));
    $('request-rows').replaceChildren(...rows);
    $('requests').hidden = rows.length === 0;
    $('requests-empty').hidden = rows.length > 0;
  }

  function renderMember(team, m, inbox, limits, firstLook) {
    const status = String(m.status || 'unknown');
    const badge = el('span', { class: 'badge status', data: { status } },
      icon(STATUS_ICONS[status] || '?'), el('span', { class: 'badge-text' }, status));
    // The lead's turns are not capped by the team's turn limit.
    const turns = limits.turns && m.name !== 'lead' ? m.turns + ' of ' + limits.turns : String(m.turns);
    const inboxCount = limits.inbox_messages ? m.inbox_length + ' of ' + limits.inbox_messages : String(m.inbox_length);
    // The member's read cursor (docs/hooks.md): letters up to read_through
    // are read; the rest are counted unread as letters arrive. Letters are
    // numbered by their ids, not by their place in the inbox, which an
    // archive shortens: the unread are the shown letters after the cursor.
    const readThrough = letterPosition(m.read_through);
    const unread = inbox && Array.isArray(inbox.messages)
      ? inbox.messages.filter((msg) => letterPosition(msg.id) > readThrough).length
      : Math.max(Number(m.unread) || 0, 0);
    // Letters the member moved to its archive (docs/api.md, L): they no
    // longer count against the inbox's limits.
    const archived = Math.max(Number(m.archived) || 0, 0);

    const stats = el('dl', { class: 'stats' },
      el('div', null, el('dt', null, 'active'), el('dd', { data: { active: String(!!m.active) } }, m.active ? 'yes, in a turn' : 'no')),
      el('div', null, el('dt', null, 'turns'), el('dd', null, turns)),
      el('div', null, el('dt', null, 'inbox'), el('dd', { data: { unread: String(unread) } }, inboxCount + (unread ? ', ' + unread + ' unread' : ''))),
      el('div', null, el('dt', null, 'archived'), el('dd', { class: 'archived', data: { archived: String(archived) } }, String(archived))),
      el('div', null, el('dt', null, 'history'), el('dd', null, String(m.history_length))),
      el('div', null, el('dt', null, 'tokens'), el('dd', { class: 'usage' }, tokens(m.usage))));
    const activity = state.doing.get(team + '/' + m.name);
    // An agent outside Mailroom made MCP requests as this member in the
    // last minute, whatever its protocol (docs/api.md, J): from the
    // member's mcp_last_seen, not from session counts. expireMCPBadges
    // takes the badge away once the minute is over.
    const seenAt = m.mcp_last_seen ? Date.parse(m.mcp_last_seen) : NaN;
    const mcp = Number.isFinite(seenAt) && Date.now() - seenAt < MCP_SEEN_MS
      ? el('span', {
        class: 'badge mcp',
        data: { mcpSeen: m.mcp_last_seen },
        title: 'An agent used MCP as ' + m.name + ' at ' + new Date(seenAt).toLocaleTimeString(),
      }, icon('⇄'), el('span', { class: 'badge-text' }, 'MCP'))
      : null;
    // A member the server wakes on mail; held after a turn that did not
    // end answered, until a reset (docs/api.md, E).
    const wake = m.wake
      ? el('span', {
        class: 'badge wake',
        data: { wake: m.wake_held ? 'held' : 'on' },
        title: m.wake_held ? m.name + ' is not woken until it is reset: its last turn did not end answered'
          : m.name + ' is woken when mail arrives',
      }, icon(m.wake_held ? '‖' : '✉'), el('span', { class: 'badge-text' }, m.wake_held ? 'wake held' : 'wake'))
      : null;
    const wokenBy = state.wokenBy.get(team + '/' + m.name);
    // A stopped or failed member, or one whose wake is held, waits for
    // the admin to look and reset it (docs/api.md, E).
    const resettable = status === 'stopped' || status === 'failed' || !!m.wake_held;
    const reset = resettable
      ? el('button', {
        type: 'button',
        class: 'reset',
        data: { reset: m.name },
        title: 'Make ' + m.name + ' idle again and release its wake (admin)',
      }, 'Reset')
      : null;
    if (reset) reset.addEventListener('click', () => resetMember(team, m.name, reset));

    let box;
    if (!inbox || inbox.error) {
      const err = inbox && inbox.error;
      box = el('p', { class: 'inbox-error', role: 'note' }, icon('⚠'),
        ' inbox could not be read: ' + (err ? err.message : 'unknown error'));
    } else if (!inbox.messages.length) {
      box = el('p', { class: 'empty' }, 'Inbox is empty.');
    } else {
      box = el('ol', { class: 'inbox', 'aria-label': 'Inbox of ' + m.name },
        ...inbox.messages.map((msg) => renderLetter(team, m.name, msg, firstLook, letterPosition(msg.id) <= readThrough)));
    }

    return el('article', { class: 'member', data: { member: m.name, status } },
      el('header', { class: 'member-head' }, el('h4', null, m.name), el('span', { class: 'member-badges' }, wake, mcp, badge)),
      m.role ? el('p', { class: 'role' }, m.role) : null,
      Array.isArray(m.skills) && m.skills.length ? el('p', { class: 'skills' }, icon('✎'), ' can do ' + m.skills.join(', ')) : null,
      stats,
      activity ? el('p', { class: 'doing', 'aria-live': 'polite' }, icon(m.active ? '⚙' : '·'), ' ' + activity) : null,
      wokenBy ? el('p', { class: 'woken', data: { wokenBy } }, icon('↳'), ' woken by ' + wokenBy) : null,
      reset,
      renderTurns(team, m.name),
      el('h5', { class: 'inbox-title' }, 'Inbox'),
      box);
  }

  // ---------- permissions ----------

  // renderPermissions lists the pending permissions of run_main's host
  // gate with an Allow and a Deny button each; decided ones leave the list.
  function renderPermissions(team, list) {
    const pending = (Array.isArray(list) ? list : []).filter((p) => p && p.status === 'pending');
    $('permission-list').replaceChildren(...pending.map((p) => {
      const input = p.input && typeof p.input === 'object' && Object.keys(p.input).length ? ' ' + JSON.stringify(p.input) : '';
      const until = p.expires_at ? new Date(p.expires_at) : null;
      const text = el('span', { class: 'permission-text' },
        el('strong', null, String(p.member)), ' asks to run ', el('code', null, String(p.tool) + input),
        ' under plan ' + String(p.plan_request_id || '—'),
        until && !isNaN(until) ? el('span', { class: 'muted' }, ' · expires ' + until.toLocaleTimeString()) : null);
      const allow = el('button', { type: 'button', class: 'primary allow', 'aria-label': 'Allow ' + p.permission_id }, icon('✔'), ' Allow');
      const deny = el('button', { type: 'button', class: 'deny', 'aria-label': 'Deny ' + p.permission_id }, icon('✖'), ' Deny');
      allow.addEventListener('click', () => decidePermission(team, p.permission_id, true, [allow, deny]));
      deny.addEventListener('click', () => decidePermission(team, p.permission_id, false, [allow, deny]));
      return el('li', { class: 'permission', data: { permissionId: p.permission_id, status: p.status } },
        icon('◷'), el('span', { class: 'req-id' }, String(p.permission_id)), text,
        el('span', { class: 'permission-actions' }, allow, deny));
    }));
    $('permissions').hidden = pending.length === 0;
  }

  async function decidePermission(team, id, allow, buttons) {
    for (const b of buttons) b.disabled = true;
    try {
      const p = await api('POST', '/teams/' + enc(team) + '/permissions/' + enc(id), { allow });
      if (state.model && state.model.view.name === team && applyEvent(state.model, 'permission', p)) {
        renderTeam(state.model.view, state.model.inboxes);
      }
    } catch (err) {
      for (const b of buttons) b.disabled = false;
      // Someone else answered first, or it expired: the refetch shows it.
      report(err, (allow ? 'allowing ' : 'denying ') + id);
    }
    scheduleRefresh(0);
  }

  function readProtocol(body) {
    if (typeof body !== 'string' || !body.startsWith(PROTOCOL_PREFIX)) return null;
    let d;
    try {
      d = JSON.parse(body.slice(PROTOCOL_PREFIX.length));
    } catch (_) {
      return { invalid: true };
    }
    if (!d || typeof d !== 'object' || Array.isArray(d) || !PROTOCOL_TYPES.includes(d.type)) return { invalid: true };
    return d;
  }

  // loadAcks returns, by letter id, the acknowledgement (null while none)
  // of every letter of inboxes that asked for one (docs/api.md, "Mail
  // that stays useful"), asked 100 ids at a time.
  async function loadAcks(team, inboxes) {
    const ids = [];
    for (const box of inboxes) {
      for (const m of (box && box.messages) || []) if (m.ack_required) ids.push(m.id);
    }
    const acks = {};
    for (let i = 0; i < ids.length; i += 100) {
      const chunk = ids.slice(i, i + 100);
      try {
        const d = await api('GET', '/teams/' + enc(team) + '/receipts?ids=' + chunk.map(enc).join(','));
        for (const r of (d && Array.isArray(d.receipts)) ? d.receipts : []) acks[r.id] = r.ack || null;
      } catch (err) {
        if (err instanceof ApiError && err.status === 401) throw err;
      }
    }
    return acks;
  }

  // showThread loads the letters of thread id and shows them, oldest
  // first, in the thread panel; it stays open across refreshes.
  async function showThread(team, id) {
    state.thread = { team, id };
    try {
      const d = await api('GET', '/teams/' + enc(team) + '/threads/' + enc(id));
      if (!state.thread || state.thread.team !== team || state.thread.id !== id) return;
      const letters = (d && Array.isArray(d.letters)) ? d.letters : [];
      $('thread-title').textContent = 'Thread ' + id;
      $('thread').dataset.thread = id;
      $('thread-letters').replaceChildren(...letters.map((m) => el('li', { class: 'thread-letter', data: { letterId: m.id } },
        el('span', { class: 'letter-id' }, String(m.id)),
        el('span', { class: 'letter-from' }, ' ' + m.sender + ' → ' + m.recipient + ': '),
        el('span', { class: 'letter-body' }, String(m.body)))));
      $('thread').hidden = false;
    } catch (err) {
      report(err, 'thread ' + id);
    }
  }

  function closeThread() {
    state.thread = null;
    $('thread').hidden = true;
    $('thread-letters').replaceChildren();
  }

  // ---------- search ----------

  // searchLetters asks for the selected team's letters that match the
  // box's words (docs/api.md, section L: the server decides what matches)
  // and lists them best first. A query the server refuses (only
  // punctuation, an unclosed quote) says why in the summary line.
  async function searchLetters(ev) {
    ev.preventDefault();
    const team = state.selected;
    const q = $('search-input').value.trim();
    if (!team || !q) {
      clearSearch();
      return;
    }
    const seq = ++state.searchSeq;
    const query = new URLSearchParams({ q, limit: String(SEARCH_LIMIT) });
    try {
      const d = await api('GET', '/teams/' + enc(team) + '/search?' + query.toString());
      if (seq !== state.searchSeq || team !== state.selected) return;
      renderSearch(team, q, (d && Array.isArray(d.results)) ? d.results : []);
    } catch (err) {
      if (seq !== state.searchSeq) return;
      if (err instanceof ApiError && err.status === 400) {
        showSearchSummary('refused', 'Not searched: ' + err.detail);
        $('search-results').replaceChildren();
        $('search-results').hidden = true;
        return;
      }
      report(err, 'search');
    }
  }

  function showSearchSummary(kind, text) {
    const line = $('search-summary');
    line.dataset.state = kind;
    line.textContent = text;
    line.hidden = false;
    $('search-clear').hidden = false;
  }

  // renderSearch lists the results: the letter's id, sender → recipient,
  // the snippet the server cut around the first match, and a link that
  // opens the letter's thread in the thread panel.
  function renderSearch(team, q, results) {
    showSearchSummary(results.length ? 'found' : 'none', results.length
      ? results.length + (results.length === 1 ? ' letter matches ' : ' letters match ') + q +
        (results.length === SEARCH_LIMIT ? ' (the best ' + SEARCH_LIMIT + ')' : '')
      : 'No letter matches ' + q + '.');
    $('search-summary').dataset.count = String(results.length);
    $('search-results').replaceChildren(...results.map((r) => {
      const m = (r && r.letter) || {};
      let thread = null;
      if (typeof m.thread_id === 'string') {
        thread = el('button', { type: 'button', class: 'letter-thread', data: { thread: m.thread_id }, title: 'Show the thread' },
          'thread ' + m.thread_id);
        thread.addEventListener('click', () => showThread(team, m.thread_id));
      }
      return el('li', { class: 'search-result', data: { letterId: String(m.id) } },
        el('div', { class: 'letter-head' },
          el('span', { class: 'letter-id' }, String(m.id)),
          el('span', { class: 'search-route' }, String(m.sender) + ' → ' + String(m.recipient)),
          thread),
        el('p', { class: 'search-snippet' }, String(r && r.snippet)));
    }));
    $('search-results').hidden = results.length === 0;
  }

  function clearSearch() {
    state.searchSeq++;
    $('search-summary').hidden = true;
    $('search-summary').textContent = '';
    $('search-results').replaceChildren();
    $('search-results').hidden = true;
    $('search-clear').hidden = true;
  }

  // ackTag shows what a letter that asked for an acknowledgement got:
  // the outcome with its note, or that one is still wanted.
  function ackTag(ack) {
    if (!ack) return el('span', { class: 'tag ack', data: { ack: 'wanted' } }, 'ack wanted');
    return el('span', { class: 'tag ack', data: { ack: String(ack.outcome) }, title: ack.note ? String(ack.note) : null },
      'ack: ' + String(ack.outcome) + (ack.note ? ' (' + String(ack.note) + ')' : ''));
  }

  // letterPosition is n of a letter id "<member>-<n>", 0 for anything else
  // (a null read_through: nothing read).
  function letterPosition(id) {
    const m = typeof id === 'string' ? /-([1-9][0-9]*)$/.exec(id) : null;
    return m ? Number(m[1]) : 0;
  }

  function renderLetter(team, member, msg, firstLook, read) {
    const key = team + '/' + member + '/' + msg.id;
    const fresh = !firstLook && !state.seen.has(key);
    state.seen.add(key);
    const proto = readProtocol(msg.body);
    const kind = proto ? (proto.invalid ? 'invalid_protocol' : proto.type) : 'text';

    const acks = (state.model && state.model.acks) || {};
    let thread = null;
    if (typeof msg.in_reply_to === 'string') {
      thread = el('button', { type: 'button', class: 'letter-thread', data: { thread: String(msg.thread_id) }, title: 'Show the thread' },
        '↳ re ' + msg.in_reply_to + ' · thread ' + String(msg.thread_id));
      thread.addEventListener('click', () => showThread(team, String(msg.thread_id)));
    }
    const head = el('div', { class: 'letter-head' },
      el('span', { class: 'letter-id' }, String(msg.id)),
      el('span', { class: 'letter-from' }, 'from ' + msg.sender),
      thread,
      msg.ack_required ? ackTag(acks[msg.id]) : null);

    let content;
    if (!proto || proto.invalid) {
      content = el('p', { class: 'letter-body' }, String(msg.body));
      if (proto) {
        content = el('div', null,
          el('span', { class: 'tag warn' }, icon('⚠'), ' not a valid protocol letter'), content);
      }
    } else if (proto.type.endsWith('_request')) {
      content = el('div', { class: 'proto request-card' },
        el('div', { class: 'proto-head' },
          el('span', { class: 'proto-type' }, icon(proto.type === 'plan_request' ? '✎' : '☾'),
            ' ' + (proto.type === 'plan_request' ? 'Plan request' : 'Shutdown request')),
          el('span', { class: 'proto-id' }, String(proto.request_id))),
        el('p', { class: 'proto-text' }, String(proto.payload == null ? '' : proto.payload)));
    } else {
      const approve = proto.approve === true;
      content = el('div', { class: 'proto response-card', data: { approve: String(approve) } },
        el('div', { class: 'proto-head' },
          el('span', { class: 'proto-type' }, icon('↩'),
            ' ' + (proto.type === 'plan_response' ? 'Plan response' : 'Shutdown response')),
          el('span', { class: 'proto-id' }, String(proto.request_id))),
        el('p', { class: 'decision', data: { approve: String(approve) } },
          icon(approve ? '✔' : '✖'), ' ' + (approve ? 'approve' : 'reject')),
        proto.feedback ? el('p', { class: 'proto-text' }, String(proto.feedback)) : null);
    }

    return el('li', {
      class: 'letter' + (fresh ? ' fresh' : ''),
      data: { letterId: msg.id, kind, sender: msg.sender, read: String(!!read) },
    }, head, content);
  }

  function renderRequest(team, r, firstLook) {
    const s = requestState(r);
    const key = team + '/' + r.request_id;
    const changed = !firstLook && state.requestStates.get(key) !== s;
    state.requestStates.set(key, s);
    const info = REQUEST_STATES[s];
    let reply = el('span', { class: 'muted' }, 'none yet');
    if (r.reply) {
      const approve = r.reply.approve === true;
      reply = el('span', { class: 'decision', data: { approve: String(approve) } },
        icon(approve ? '✔' : '✖'), ' ' + (approve ? 'approve' : 'reject'),
        r.reply.feedback ? el('span', { class: 'feedback' }, String(r.reply.feedback)) : null);
    }
    const cell = (label, cls, ...content) =>
      el('td', { 'data-label': label, class: cls }, el('div', { class: 'cell' }, ...content));
    return el('tr', { class: changed ? 'fresh' : '', data: { requestId: r.request_id, state: s } },
      cell('Id', null, el('span', { class: 'req-id' }, String(r.request_id)),
        r.receipt ? el('span', { class: 'muted receipt' }, 'letter ' + r.receipt) : null),
      cell('Kind', null, String(r.kind)),
      cell('Sender → target', null, String(r.sender) + ' → ' + String(r.target)),
      cell('Payload', 'payload', String(r.payload)),
      cell('State', null, el('span', { class: 'badge req-state', data: { state: s } },
        icon(info.icon), el('span', { class: 'badge-text' }, info.text))),
      cell('Reply sent', null, reply));
  }

  // ---------- file reservations ----------

  // resNumber orders reservations by the number of their id.
  function resNumber(r) {
    const n = Number(String(r.reservation_id).replace('res-', ''));
    return isNaN(n) ? 0 : n;
  }

  // expiryTimer re-renders the list when the next reservation expires:
  // the server sends no event for an expiry (a reservation past its
  // expires_at simply holds nothing), so the page looks at the clock.
  let expiryTimer = null;

  // renderReservations shows the live reservations: holder, kind, patterns
  // and expiry; released and expired ones are left out.
  function renderReservations(list) {
    const now = Date.now();
    const live = (Array.isArray(list) ? list : [])
      .filter((r) => !r.released_at && Date.parse(r.expires_at) > now)
      .sort((a, b) => resNumber(a) - resNumber(b));
    $('reservations').replaceChildren(...live.map((r) => {
      const until = new Date(r.expires_at);
      const kind = r.exclusive ? 'exclusive' : 'shared';
      const paths = Array.isArray(r.paths) ? r.paths : [];
      return el('li', { class: 'reservation', data: { reservationId: String(r.reservation_id), member: String(r.member), kind } },
        el('div', { class: 'task-head' },
          el('span', { class: 'req-id' }, String(r.reservation_id)),
          el('span', { class: 'reservation-member' }, String(r.member)),
          el('span', { class: 'badge', data: { kind } }, kind),
          el('span', { class: 'reservation-expiry muted' }, 'until ' + until.toLocaleTimeString())),
        el('div', { class: 'reservation-paths' }, ...paths.map((p) => el('code', null, String(p)))),
        r.reason ? el('p', { class: 'task-result' }, String(r.reason)) : null);
    }));
    $('reservations').hidden = live.length === 0;
    $('reservations-empty').hidden = live.length > 0;
    if (expiryTimer) clearTimeout(expiryTimer);
    expiryTimer = null;
    if (live.length) {
      const next = Math.min(...live.map((r) => Date.parse(r.expires_at))) - now;
      expiryTimer = setTimeout(() => {
        if (state.model) renderReservations(state.model.reservations);
      }, Math.min(Math.max(next + 50, 50), 2147483000));
    }
  }

  // ---------- task board ----------

  const TASK_COLUMNS = ['pending', 'in_progress', 'completed'];

  // taskNumber orders tasks by the number of their id (task-2 before task-10).
  function taskNumber(t) {
    const n = Number(String(t.task_id).replace('task-', ''));
    return isNaN(n) ? 0 : n;
  }

  // renderBoard shows the team's tasks in three columns; deleted tasks are
  // kept by the server but not shown. A pending task whose blockers are
  // not all completed says what it waits for.
  function renderBoard(list) {
    const tasks = (Array.isArray(list) ? list : []).slice().sort((a, b) => taskNumber(a) - taskNumber(b));
    const status = new Map(tasks.map((t) => [t.task_id, t.status]));
    let shown = 0;
    for (const col of TASK_COLUMNS) {
      const cards = tasks.filter((t) => t.status === col).map((t) => renderTask(t, status));
      shown += cards.length;
      $('board-' + col).replaceChildren(...cards);
      $('count-' + col).textContent = '(' + cards.length + ')';
    }
    $('board').hidden = shown === 0;
    $('tasks-empty').hidden = shown > 0;
  }

  function renderTask(t, status) {
    const blockedBy = Array.isArray(t.blocked_by) ? t.blocked_by : [];
    const waiting = blockedBy.filter((id) => status.get(id) !== 'completed' && status.get(id) !== 'deleted');
    const facts = [];
    if (t.owner) facts.push(el('span', { class: 'task-owner' }, icon('●'), ' owner ' + String(t.owner)));
    if (t.assignee) facts.push(el('span', { class: 'task-assignee' }, icon('→'), ' for ' + String(t.assignee)));
    if (Array.isArray(t.needs) && t.needs.length) facts.push(el('span', { class: 'task-needs' }, icon('✎'), ' needs ' + t.needs.join(', ')));
    if (blockedBy.length) {
      facts.push(el('span', { class: 'task-blockers', data: { waiting: String(waiting.length > 0) } },
        icon(waiting.length ? '⧗' : '✔'), ' ' + (waiting.length ? 'waits for ' + waiting.join(', ') : 'after ' + blockedBy.join(', '))));
    }
    return el('li', { class: 'task', data: { taskId: t.task_id, status: String(t.status), blocked: String(waiting.length > 0) } },
      el('div', { class: 'task-head' }, el('span', { class: 'req-id' }, String(t.task_id)), el('span', { class: 'task-title' }, String(t.title))),
      facts.length ? el('div', { class: 'task-facts' }, ...facts) : null,
      t.status === 'completed' && t.result ? el('p', { class: 'task-result' }, String(t.result)) : null);
  }

  // ---------- scenarios ----------

  function scenarioBody(name) {
    const step = Math.max(0, Math.min(1000, parseInt($('step-ms').value, 10) || 0));
    if (name !== 'team-protocols') return { step_ms: step };
    const form = $('scenario-form');
    return {
      plan: form.elements.plan.value,
      decision: form.elements.decision.value,
      expected: $('expected').value,
      step_ms: step,
    };
  }

  async function startRun(ev) {
    ev.preventDefault();
    if (state.running) return;
    const name = $('scenario').value;
    const body = scenarioBody(name);
    state.running = true;
    $('run-button').disabled = true;
    clearStatus();
    const result = $('run-result');
    result.replaceChildren(el('div', { class: 'running', data: { runState: 'running' } },
      el('span', { class: 'spinner', 'aria-hidden': 'true' }),
      el('span', { class: 'running-text' }, 'Running ' + name + '… waiting for its team to appear.')));

    const known = new Set(state.teams.map((t) => t.name));
    const stopPoll = new AbortController();
    // The run answers only when it is over. Its `run` event names the new
    // team as soon as the team exists, so a stream of every team's events
    // switches the view at once; polling the team list below is the
    // fallback when the stream is slow or refused.
    const found = (team) => {
      if (stopPoll.signal.aborted) return;
      stopPoll.abort();
      known.add(team);
      loadTeams().catch(() => {}).finally(() => selectTeam(team));
      selectTeam(team);
      const txt = result.querySelector('.running-text');
      if (txt) txt.textContent = 'Running ' + name + ' in team ' + team + '…';
    };
    stream('', stopPoll.signal, () => {}, (type, raw) => {
      if (type !== 'run') return '';
      let ev = null;
      try {
        ev = JSON.parse(raw);
      } catch (_) {
        return '';
      }
      const team = ev && ev.data && typeof ev.data.team === 'string' ? ev.data.team : '';
      if (team && !known.has(team)) {
        found(team);
        return 'resync'; // ends this stream
      }
      return '';
    }).catch(() => {});
    const watch = (async () => {
      try {
        const fresh = await api('GET', '/teams', undefined, stopPoll.signal);
        for (const t of (fresh && fresh.teams) || []) known.add(t.name);
      } catch (_) { /* the next round tries again */ }
      while (!stopPoll.signal.aborted) {
        await sleep(RUN_POLL_MS, stopPoll.signal);
        if (stopPoll.signal.aborted) return;
        try {
          const doc = await api('GET', '/teams', undefined, stopPoll.signal);
          const teams = (doc && doc.teams) || [];
          const added = teams.find((t) => !known.has(t.name));
          if (added) {
            state.teams = teams;
            renderTeamOptions();
            found(added.name);
            return;
          }
        } catch (err) {
          if (err && err.name === 'AbortError') return;
        }
      }
    })();

    try {
      const doc = await api('POST', '/scenarios/' + enc(name) + '/runs', body);
      stopPoll.abort();
      await watch;
      if (doc && doc.team) {
        await loadTeams().catch(() => {});
        selectTeam(doc.team);
      }
      scheduleRefresh(0);
      result.replaceChildren(renderResult(doc));
    } catch (err) {
      stopPoll.abort();
      result.replaceChildren(el('p', { class: 'run-failed', data: { runState: 'error' } },
        icon('✖'), ' The run could not be completed.'));
      report(err, 'run ' + name);
    } finally {
      state.running = false;
      $('run-button').disabled = false;
    }
  }

  function renderResult(doc) {
    const ok = doc.ok === true;
    const checks = Array.isArray(doc.checks) ? doc.checks : [];
    const box = el('div', { class: 'result', data: { runState: 'done', ok: String(ok) } },
      el('p', { class: 'result-head' }, icon(ok ? '✔' : '✖'),
        ' ' + (ok ? 'Run ok — every check held' : 'Run failed — some checks did not hold')),
      el('p', { class: 'muted' }, 'run ' + String(doc.run_id) +
        (doc.team !== doc.run_id ? ' · team ' + String(doc.team) : '') +
        (typeof doc.model_requests === 'number' ? ' · ' + doc.model_requests + ' model requests' : '')));

    if (checks.length) {
      // A check with applicable: false (a run on a real model cannot
      // promise what only the script can) is neither passed nor failed.
      const applies = (c) => c.applicable !== false;
      const counted = checks.filter(applies);
      const passed = counted.filter((c) => c.ok === true).length;
      const skipped = checks.length - counted.length;
      box.append(el('h3', { class: 'sub' }, 'Checks · ' + passed + ' of ' + counted.length + ' passed' +
          (skipped ? ' · ' + skipped + ' not applicable' : '')),
        el('ul', { class: 'checks' }, ...checks.map((c) => {
          const na = !applies(c);
          const ok = c.ok === true;
          const head = el('span', { class: 'check-line' },
            el('span', { class: 'badge check-badge', data: { ok: na ? 'na' : String(ok) } },
              icon(na ? '–' : ok ? '✔' : '✖'), el('span', { class: 'badge-text' }, na ? 'n/a' : ok ? 'pass' : 'fail')),
            el('span', { class: 'check-name' }, ...breakable(String(c.name))));
          // Details stay folded for passing checks and open for failing ones.
          const body = c.detail
            ? el('details', { open: !ok }, el('summary', null, head), el('p', { class: 'check-detail' }, String(c.detail)))
            : head;
          return el('li', { class: 'check', data: { check: c.name, ok: String(ok) } }, body);
        })));
    }

    if (doc.outcome && typeof doc.outcome === 'object') {
      const dl = el('dl', { class: 'outcome' });
      for (const [k, v] of Object.entries(doc.outcome)) {
        dl.append(el('div', null, el('dt', null, k),
          el('dd', null, v === null ? '—' : typeof v === 'object' ? JSON.stringify(v) : String(v))));
      }
      box.append(el('h3', { class: 'sub' }, 'Outcome'), dl);
    }
    return box;
  }

  const SCENARIO_HINTS = {
    'team-protocols': 'A reader asks the lead to approve a plan, runs the program only if both the plan and the host allow it, then is shut down.',
    'agent-teams': 'A reader and a reviewer investigate read-only in parallel and report to the lead by letter; the lead sums up.',
  };

  // breakable splits a snake_case name into text nodes with <wbr> after
  // each underscore, so long names wrap at word joints.
  function breakable(name) {
    const out = [];
    name.split('_').forEach((part, i, all) => {
      out.push(part + (i < all.length - 1 ? '_' : ''));
      if (i < all.length - 1) out.push(el('wbr'));
    });
    return out;
  }

  function syncScenarioOptions() {
    const protocols = $('scenario').value === 'team-protocols';
    $('scenario-hint').textContent = SCENARIO_HINTS[$('scenario').value] || '';
    const fs = $('protocol-options');
    fs.disabled = !protocols;
    fs.hidden = !protocols;
  }

  // ---------- start ----------

  async function connect() {
    $('token-panel').hidden = true;
    $('app').hidden = false;
    $('picker').hidden = false;
    $('forget').hidden = false;
    try {
      await loadTeams();
      clearStatus();
    } catch (err) {
      report(err, 'team list');
      if (!state.token) return;
    }
    if (state.teamPoll) clearInterval(state.teamPoll);
    state.teamPoll = setInterval(() => {
      if (!state.token) return;
      loadTeams().catch((err) => report(err, 'team list'));
    }, TEAM_POLL_MS);
  }

  // expireMCPBadges takes away the MCP badges of members not seen in the
  // last minute: no event says that time passed.
  function expireMCPBadges() {
    for (const b of document.querySelectorAll('.badge.mcp[data-mcp-seen]')) {
      if (!(Date.now() - Date.parse(b.dataset.mcpSeen) < MCP_SEEN_MS)) b.remove();
    }
  }

  function init() {
    setInterval(expireMCPBadges, MCP_CHECK_MS);
    $('status-close').addEventListener('click', clearStatus);
    $('thread-close').addEventListener('click', closeThread);
    $('search-form').addEventListener('submit', searchLetters);
    $('search-clear').addEventListener('click', () => {
      $('search-input').value = '';
      clearSearch();
    });
    $('token-form').addEventListener('submit', (ev) => {
      ev.preventDefault();
      const t = $('token-input').value.trim();
      if (!t) return;
      sessionStorage.setItem(TOKEN_KEY, t);
      $('token-input').value = '';
      state.token = t;
      clearStatus();
      connect();
    });
    $('forget').addEventListener('click', () => {
      sessionStorage.removeItem(TOKEN_KEY);
      state.token = '';
      state.selected = '';
      showTokenPanel();
    });
    $('team-select').addEventListener('change', (ev) => {
      // Choosing a team by hand stops following the newest one.
      $('follow').checked = false;
      selectTeam(ev.target.value);
    });
    $('follow').addEventListener('change', (ev) => {
      if (ev.target.checked && state.teams.length) selectTeam(state.teams[0].name);
    });
    $('scenario').addEventListener('change', syncScenarioOptions);
    $('step-ms').addEventListener('input', (ev) => {
      $('step-out').textContent = ev.target.value + ' ms';
    });
    $('scenario-form').addEventListener('submit', startRun);
    syncScenarioOptions();

    loadWokenBy();
    state.token = readToken();
    if (state.token) connect();
    else showTokenPanel();
  }

  init();
}());
