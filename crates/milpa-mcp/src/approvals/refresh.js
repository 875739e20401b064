// The approvals queue's refresh (served from /approvals/refresh.js, loaded by the queue).
// Every data-refresh-ms it fetches the list again (data-refresh-url, the server's
// /approvals/live) and puts it in place of the one shown, card by card: a card someone has
// focused or typed a reason into stays the very element it was, so nothing typed, no
// cursor and no focus is lost. It waits while someone types, while a decision is being
// sent and while the tab is hidden. Without it the page works the same, only unrefreshed.
"use strict";

(() => {
  const live = document.getElementById("live");
  const every = Number(live && live.dataset.refreshMs);
  const url = live && live.dataset.refreshUrl;
  if (!live || !url || !(every > 0)) {
    return;
  }
  const status = document.getElementById("refresh-status");
  // A keystroke this recent means someone is typing: the list waits for them.
  const TYPING_MS = 3000;
  // A decision sent this recently is on its way (or its passkey check is): the list waits.
  const SENDING_MS = 30000;
  let typedAt = 0;
  let sentAt = 0;
  let running = false;
  let stopped = false;

  const say = (text) => {
    if (status) {
      status.textContent = text;
      status.hidden = false;
    }
  };
  const clock = () => new Date().toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
  const seconds = Math.round(every / 1000);
  const waitFor = () => {
    const now = Date.now();
    return now - typedAt < TYPING_MS || now - sentAt < SENDING_MS || document.hidden;
  };

  document.addEventListener("input", (event) => {
    if (live.contains(event.target)) {
      typedAt = Date.now();
    }
  });
  document.addEventListener("keydown", (event) => {
    if (live.contains(event.target)) {
      typedAt = Date.now();
    }
  });
  document.addEventListener("submit", () => {
    sentAt = Date.now();
  });

  // A card the person is busy with: focus inside it, or something typed into it.
  const busy = (card) => {
    if (card.contains(document.activeElement)) {
      return true;
    }
    for (const field of card.querySelectorAll("input[type=text], textarea")) {
      if (field.value !== field.defaultValue) {
        return true;
      }
    }
    return false;
  };

  // Puts `fresh` (the fetched #live) in place of the list shown. Busy cards are never taken
  // out of the document (that would blur them): the cards around them are. A card the
  // server sends unchanged stays too, so a refresh touches only what changed (a person's
  // click or selection on it is not lost either).
  const swap = (fresh) => {
    const section = live.querySelector("#pending");
    const freshSection = fresh.querySelector("#pending");
    if (!section || !freshSection) {
      live.replaceChildren(...fresh.childNodes);
      return;
    }
    const freshCards = new Map(
      [...freshSection.children].map((card) => [card.dataset.approvalId, card]),
    );
    const kept = new Map();
    for (const card of [...section.children]) {
      const id = card.dataset.approvalId;
      const same = freshCards.get(id);
      if (id !== undefined && (busy(card) || (same && same.isEqualNode(card)))) {
        kept.set(id, card);
      } else {
        card.remove();
      }
    }
    const wanted = new Set(freshCards.keys());
    // A busy card whose approval is no longer waiting (decided elsewhere, expired) goes:
    // the decisions below say what became of it.
    for (const [id, card] of kept) {
      if (!wanted.has(id)) {
        card.remove();
        kept.delete(id);
      }
    }
    let next = section.firstChild;
    for (const card of [...freshSection.children]) {
      const mine = kept.get(card.dataset.approvalId);
      if (mine) {
        next = mine.nextSibling;
      } else {
        section.insertBefore(card, next);
      }
    }
    for (const node of [...live.childNodes]) {
      if (node !== section) {
        node.remove();
      }
    }
    const nodes = [...fresh.childNodes];
    const at = nodes.indexOf(freshSection);
    for (const node of nodes.slice(0, at)) {
      live.insertBefore(node, section);
    }
    for (const node of nodes.slice(at + 1)) {
      live.appendChild(node);
    }
  };

  const refresh = async () => {
    if (running || stopped || waitFor()) {
      return;
    }
    running = true;
    try {
      const answer = await fetch(url, {
        credentials: "same-origin",
        cache: "no-store",
        headers: { Accept: "text/html" },
      });
      if (answer.status === 401) {
        stopped = true;
        say("Your session ended: reload the page to sign in again.");
        return;
      }
      if (!answer.ok) {
        say("Could not refresh at " + clock() + " (the server answered " + answer.status + "); trying again.");
        return;
      }
      const html = await answer.text();
      // Typed or sent while the list was on its way: this one is dropped, the next counts.
      if (waitFor()) {
        return;
      }
      const parsed = new DOMParser().parseFromString(html, "text/html").getElementById("live");
      if (!parsed) {
        return;
      }
      swap(document.importNode(parsed, true));
      say("Updated at " + clock() + "; refreshes every " + seconds + " s.");
    } catch (error) {
      say("Could not reach the server at " + clock() + "; trying again.");
    } finally {
      running = false;
    }
  };

  say("Refreshes every " + seconds + " s.");
  setInterval(refresh, every);
  document.addEventListener("visibilitychange", () => {
    if (!document.hidden) {
      refresh();
    }
  });
})();
