-- 0014: an owner's settings name the sandbox runtime of the sandboxes
-- they create without naming one (core.Settings.SandboxRuntime); '' (and
-- every row stored before this migration) leaves it to the server.
ALTER TABLE settings ADD COLUMN sandbox_runtime TEXT NOT NULL DEFAULT '';
