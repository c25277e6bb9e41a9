import { render } from "preact";
import { App } from "./components/App";
import { boot, onRoute } from "./state/app";

window.addEventListener("hashchange", onRoute);
// The requests go out first, in parallel; none can answer before the
// synchronous render below, which replaces the static shell of index.html
// with the app's own in the same task (so no frame shows neither).
boot();
const root = document.getElementById("app")!;
root.replaceChildren();
render(<App />, root);
