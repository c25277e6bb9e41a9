// A tiny observable store for app-wide state.
import { useLayoutEffect, useState } from "preact/hooks";

export function createStore<S extends object>(initial: S) {
  let state = initial;
  const subs = new Set<() => void>();
  return {
    get: () => state,
    set(patch: Partial<S> | ((s: S) => Partial<S>)) {
      const p = typeof patch === "function" ? patch(state) : patch;
      state = { ...state, ...p };
      subs.forEach((f) => f());
    },
    subscribe(f: () => void) { subs.add(f); return () => { subs.delete(f); }; },
  };
}

export function useStore<S extends object>(store: { get: () => S; subscribe: (f: () => void) => () => void }): S {
  const [, tick] = useState(0);
  const seen = store.get();
  useLayoutEffect(() => {
    const unsub = store.subscribe(() => tick((n) => n + 1));
    // A change between render and subscription must not be missed.
    if (store.get() !== seen) tick((n) => n + 1);
    return unsub;
  }, [store]);
  return seen;
}
