;; pong: the smallest guest that speaks the Kiln WASM ABI v1 (specs/wasm-abi.md),
;; one tool, "ping", that answers "pong". It exists to measure what the host
;; itself costs to load and call a module, apart from a guest's size and
;; runtime (see BenchmarkWASMColdStart). Rebuild pong.wasm with:
;;   wat2wasm pong.wat -o pong.wasm
(module
  (memory (export "memory") 1)
  (global $heap (mut i32) (i32.const 4096))
  (data (i32.const 1024) "[{\"name\":\"ping\",\"description\":\"Answer pong.\",\"idempotent\":true}]")
  (data (i32.const 2048) "{\"result\":\"pong\"}")
  (func (export "_initialize"))
  (func (export "kiln_abi_version") (result i32) (i32.const 1))
  ;; Every request goes to the same buffer at 4096, grown to fit.
  (func (export "kiln_alloc") (param $size i32) (result i32)
    (local $need i32)
    (local.set $need
      (i32.sub
        (i32.shr_u (i32.add (i32.add (global.get $heap) (local.get $size)) (i32.const 65535)) (i32.const 16))
        (memory.size)))
    (if (i32.gt_s (local.get $need) (i32.const 0))
      (then (if (i32.lt_s (memory.grow (local.get $need)) (i32.const 0)) (then (return (i32.const 0))))))
    (global.get $heap))
  (func (export "kiln_describe") (result i64)
    (i64.or (i64.shl (i64.const 1024) (i64.const 32)) (i64.const 64)))
  (func (export "kiln_call") (param i32 i32) (result i64)
    (i64.or (i64.shl (i64.const 2048) (i64.const 32)) (i64.const 17))))
