import { render } from "preact";
import { App } from "./components/App";
import { boot, onRoute } from "./state/app";

window.addEventListener("hashchange", onRoute);
render(<App />, document.getElementById("app")!);
boot();
