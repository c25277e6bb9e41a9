import { render } from "preact";
import { App } from "./components/App";
import { applyTheme, boot, onRoute, storedTheme } from "./state/app";

// The theme this browser last had, before the app renders (the static shell may paint
// in the system's first: the CSP allows no inline script); the settings correct it when they answer.
applyTheme(storedTheme());
window.addEventListener("hashchange", onRoute);
// The requests go out first, in parallel; none can answer before the
// synchronous render below, which replaces the static shell of index.html
// with the app's own in the same task (so no frame shows neither).
boot();
const root = document.getElementById("app")!;
root.replaceChildren();
render(<App />, root);
