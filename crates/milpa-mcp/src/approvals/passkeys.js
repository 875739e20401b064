// The approvals page's passkey ceremonies (served from /approvals/passkeys.js, loaded only
// on pages of an approver who enrolled a passkey or opened an enrolment link). The server
// checks everything; this only carries options to the authenticator and its answer back
// in an ordinary form post.
"use strict";

function say(form, text) {
  let notice = form.querySelector(".passkey-error");
  if (!notice) {
    notice = document.createElement("p");
    notice.className = "notice refused passkey-error";
    notice.setAttribute("role", "alert");
    form.prepend(notice);
  }
  notice.textContent = text;
}

function hidden(form, name, value) {
  let input = form.querySelector("input[type=hidden][name=\"" + name + "\"]");
  if (!input) {
    input = document.createElement("input");
    input.type = "hidden";
    input.name = name;
    form.appendChild(input);
  }
  input.value = value;
}

function unsupported() {
  return !window.PublicKeyCredential || !PublicKeyCredential.parseRequestOptionsFromJSON;
}

// A decision: ask the server for a challenge bound to this approval and verdict, have the
// authenticator sign it (user verification required), post the assertion with the form.
// Listened for on the document, so the forms of cards the queue's refresh brings in are
// handled too.
document.addEventListener("submit", async (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.matches("form.decide[data-passkey]")) {
    return;
  }
  event.preventDefault();
  const decision = event.submitter ? event.submitter.value : "";
  if (unsupported()) {
    say(form, "This browser cannot use passkeys; nothing was decided.");
    return;
  }
  try {
    const body = new URLSearchParams();
    body.set("csrf", form.querySelector("input[name=csrf]").value);
    body.set("decision", decision);
    const answer = await fetch(form.dataset.challenge, {
      method: "POST",
      body,
      credentials: "same-origin",
    });
    const options = await answer.json();
    if (!answer.ok) {
      say(form, options.error || "The server refused to start the passkey check.");
      return;
    }
    const publicKey = PublicKeyCredential.parseRequestOptionsFromJSON(options.publicKey);
    const credential = await navigator.credentials.get({ publicKey });
    hidden(form, "assertion", JSON.stringify(credential.toJSON()));
    hidden(form, "decision", decision);
    form.submit();
  } catch (error) {
    say(form, "The passkey check did not complete (" + error.name + "); nothing was decided.");
  }
});

// Enrolment: create a passkey for the signed-in approver and post its public part.
const enroll = document.querySelector("form#passkey-enroll");
if (enroll) {
  enroll.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (unsupported()) {
      say(enroll, "This browser cannot create passkeys.");
      return;
    }
    try {
      const options = JSON.parse(enroll.dataset.options);
      const publicKey = PublicKeyCredential.parseCreationOptionsFromJSON(options.publicKey);
      const credential = await navigator.credentials.create({ publicKey });
      hidden(enroll, "credential", JSON.stringify(credential.toJSON()));
      enroll.submit();
    } catch (error) {
      say(enroll, "No passkey was created (" + error.name + ").");
    }
  });
}
