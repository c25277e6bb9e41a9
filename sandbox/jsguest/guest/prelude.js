// The guest's JavaScript prelude: console, process.stdout/stderr and
// process.nextTick, queueMicrotask, setImmediate, over the native
// functions main.go passes in. It runs before the script, in a function
// of its own, so it leaves no names of its own behind.
(function (native) {
  'use strict';
  const maxItems = 100, maxDepth = 2;

  function quote(s) {
    return "'" + s.replace(/\\/g, '\\\\').replace(/'/g, "\\'").replace(/\n/g, '\\n') + "'";
  }

  function key(k) {
    return /^[A-Za-z_$][\w$]*$/.test(k) ? k : quote(k);
  }

  function list(open, items, close) {
    if (items.length === 0) return open + close;
    const one = open + ' ' + items.join(', ') + ' ' + close;
    if (one.length <= 72 && one.indexOf('\n') < 0) return one;
    return open + '\n  ' + items.join(',\n').split('\n').join('\n  ') + '\n' + close;
  }

  // inspect formats v roughly as node's util.inspect does.
  function inspect(v, depth, seen) {
    switch (typeof v) {
      case 'string': return depth === 0 ? v : quote(v);
      case 'number': return Object.is(v, -0) ? '-0' : String(v);
      case 'bigint': return String(v) + 'n';
      case 'symbol': return v.toString();
      case 'undefined': return 'undefined';
      case 'boolean': return String(v);
      case 'function': {
        const name = v.name ? ': ' + v.name : ' (anonymous)';
        return /^class\s/.test(Function.prototype.toString.call(v)) ? '[class' + (v.name ? ' ' + v.name : '') + ']' : '[Function' + name + ']';
      }
    }
    if (v === null) return 'null';
    if (v instanceof Error) return typeof v.stack === 'string' && v.stack ? v.stack.replace(/\n$/, '') : String(v);
    if (v instanceof Date) return isNaN(v) ? 'Invalid Date' : v.toISOString();
    if (v instanceof RegExp) return String(v);
    if (v instanceof Promise) return 'Promise {}';
    if (seen.indexOf(v) >= 0) return '[Circular]';
    const ctor = v.constructor && typeof v.constructor.name === 'string' ? v.constructor.name : '';
    if (depth > maxDepth) return Array.isArray(v) ? '[Array]' : '[' + (ctor || 'Object') + ']';
    seen = seen.concat([v]);
    const inner = x => inspect(x, depth + 1, seen);
    const items = [];
    const more = n => { if (n > maxItems) items.push('... ' + (n - maxItems) + ' more item' + (n - maxItems > 1 ? 's' : '')); };
    if (Array.isArray(v)) {
      for (let i = 0; i < Math.min(v.length, maxItems); i++) items.push(i in v ? inner(v[i]) : '<empty>');
      more(v.length);
      return list('[', items, ']');
    }
    if (ArrayBuffer.isView(v) && !(v instanceof DataView)) {
      for (let i = 0; i < Math.min(v.length, maxItems); i++) items.push(inner(v[i]));
      more(v.length);
      return list(ctor + '(' + v.length + ') [', items, ']');
    }
    if (v instanceof Map) {
      for (const [k, x] of v) { if (items.length < maxItems) items.push(inner(k) + ' => ' + inner(x)); }
      more(v.size);
      return list('Map(' + v.size + ') {', items, '}');
    }
    if (v instanceof Set) {
      for (const x of v) { if (items.length < maxItems) items.push(inner(x)); }
      more(v.size);
      return list('Set(' + v.size + ') {', items, '}');
    }
    const keys = Object.keys(v);
    for (const k of keys.slice(0, maxItems)) items.push(key(k) + ': ' + inner(v[k]));
    more(keys.length);
    const prefix = ctor && ctor !== 'Object' ? ctor + ' ' : (Object.getPrototypeOf(v) === null ? '[Object: null prototype] ' : '');
    return list(prefix + '{', items, '}');
  }

  function format(args) {
    return args.map(a => inspect(a, 0, [])).join(' ') + '\n';
  }

  const out = s => native.write(1, s), err = s => native.write(2, s);
  globalThis.console = {
    log: (...a) => out(format(a)),
    info: (...a) => out(format(a)),
    debug: (...a) => out(format(a)),
    error: (...a) => err(format(a)),
    warn: (...a) => err(format(a)),
  };
  native.process.stdout = { write: s => { out(String(s)); return true; } };
  native.process.stderr = { write: s => { err(String(s)); return true; } };
  native.process.nextTick = (fn, ...a) => { Promise.resolve().then(() => fn(...a)); };
  globalThis.queueMicrotask = fn => { Promise.resolve().then(() => fn()); };
  globalThis.setImmediate = (fn, ...a) => globalThis.setTimeout(fn, 0, ...a);
  globalThis.clearImmediate = id => globalThis.clearTimeout(id);
  return inspect;
})
