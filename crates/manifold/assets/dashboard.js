// Why: the dashboard's pages are complete without this file (they are server-rendered and every
// action is a plain form); it only keeps the parts marked data-live fresh, from the server's own
// SSE streams, so an operator sees a server go down or a call arrive without reloading.
"use strict";

// Rows kept in a live list that grows (live calls), so a long-open page stays light.
const MAX_LIVE_ROWS = 500;

for (const element of document.querySelectorAll("[data-live]")) {
  const mode = element.dataset.liveMode || "replace";
  const source = new EventSource(element.dataset.live);
  source.onmessage = (event) => {
    if (mode === "prepend") {
      element.insertAdjacentHTML("afterbegin", event.data);
      while (element.children.length > MAX_LIVE_ROWS) {
        element.lastElementChild.remove();
      }
    } else {
      element.innerHTML = event.data;
    }
  };
  // The session ended or the gateway stopped: the browser retries on its own; nothing to do.
  source.onerror = () => {};
}
