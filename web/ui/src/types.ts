// JSON wire types of the Kiln API (core/kiln.go).
export interface Folder { id: string; name: string; position: number; created_at?: string; updated_at?: string }
export interface Thread {
  id: string; title: string; folder_id?: string; pinned: boolean; source?: string; model?: string;
  status: "idle" | "running" | "interrupted" | "failed" | "cancelled" | string;
  active_run_id?: string; unread_run_id?: string; unread: boolean; open_actions: number;
  last_message?: string; usage?: Usage; created_at: string; updated_at: string; match?: SearchMatch;
  /** The folder grant (by ID) the thread's runs work in unless they name one. */
  working_folder?: string;
  /** A fork's parent thread and the index of the parent's assistant message it was taken at. */
  parent_thread_id?: string; parent_message_index?: number;
  /** Of a thread a trigger started: which fire it was (absent once the trigger is deleted). */
  trigger?: ThreadTrigger;
}
/** The fire of a trigger that started a thread (core.ThreadTrigger). */
export interface ThreadTrigger {
  id: string; name?: string; kind: "cron" | "webhook" | string; timezone?: string; occurrence_id: string;
  cause: "schedule" | "catchup" | "webhook" | "manual" | string; scheduled_at: string; summary?: string;
}
/** Where a search matched (search results only); match marks the words that matched. */
export interface SnippetPart { text: string; match?: boolean }
export interface SearchMatch { in: "title" | "message" | string; message_index?: number; snippet: SnippetPart[] }
/** Model tokens, of a run or summed over a thread's runs. */
export interface Usage { input_tokens: number; output_tokens: number }
export type RunStatus = "queued" | "running" | "interrupted" | "succeeded" | "failed" | "cancelled";
export interface Run {
  id: string; thread_id: string; status: RunStatus; model: string; error?: string; input?: { text: string; attachments?: string[] };
  working_folder?: string;
  steps?: number; tool_calls?: number; cancel_requested?: boolean; usage?: Usage; created_at?: string;
  /** Set on a subagent's run: the run and task call it answers, its namespace and the skill it follows. */
  parent_run_id?: string; parent_call_id?: string; namespace?: string; agent?: { skill: string; tools?: string[] };
}
export interface ToolCall { id: string; name: string; args: unknown }
/** One piece of a message's content; an image or a file refers to its bytes by uri (attachment://<id>) or has them inline (data, base64). */
export interface Part { type: "text" | "image" | "file" | string; text?: string; mime_type?: string; name?: string; uri?: string; data?: string }
export interface Message {
  index: number; run_id?: string; role: "user" | "assistant" | "tool" | string; text?: string;
  /** A subagent's message (its run's namespace); absent for the thread's own conversation. */
  namespace?: string;
  /** Only when the content is more than the text (an attachment, several text parts); text is then the text parts joined. */
  parts?: Part[];
  tool_calls?: ToolCall[]; tool_call_id?: string; name?: string; is_error?: boolean; created_at?: string;
}
export interface Decision { decision: string; args?: unknown; message?: string }
export interface Interrupt {
  id: string; run_id: string; thread_id: string; kind: "approval" | "recovery" | string;
  tool_call_id?: string; tool: string; args: unknown; allowed_decisions: string[]; reason?: string;
  status: "open" | "decided" | "cancelled" | string; decision?: Decision; created_at?: string;
}
export interface InboxItem {
  queue: "unread" | "action"; thread_id: string; thread_title: string; folder_id?: string; run_id: string;
  run_status?: RunStatus; preview?: string; interrupt_id?: string; kind?: string; tool?: string; args?: unknown;
  allowed_decisions?: string[]; reason?: string; assistant_text?: string; pinned?: boolean; time: string; match?: SearchMatch;
}
export interface Counts { unread: number; action: number }
export interface KEvent {
  seq: number; thread_id?: string; run_id?: string; namespace?: string; type: string; payload?: any; time: string;
}
export interface Status {
  version: string; data_root: string; default_model: string; started_at: string;
  uptime_seconds: number; active_runs: number; subscribers: number;
}
/** A plugin as GET /plugins lists it (plugins/registry/types.go). */
export interface Plugin {
  id: string; version: string; description: string; runtime: "builtin" | "wasm" | "process" | "data" | string; provides: string[] | null;
  builtin: boolean; enabled: boolean; status: "enabled" | "disabled" | "failed" | string; error?: string;
  tools: string[] | null; interrupt_on?: unknown; permissions: string[] | null; sha256: string; dir?: string;
  /** Per kind, what the enabled plugin adds: models, skills, MCP servers (and its tools). */
  provided?: Record<string, string[]>;
  installed_at?: string; restarts?: number; pid?: number;
  /** Where a plugin installed from a marketplace came from; absent for one installed from a folder. */
  source?: PluginSource;
  /** The version a rollback returns to (kept on disk), or "". */
  previous?: string;
  /** The version the plugin is held at, or absent: a pinned plugin is not upgraded, replaced or rolled back until unpinned. */
  pinned?: string;
  /** The installed folder's digest (plugins/integrity), what a marketplace publishes; absent for built-ins. */
  digest?: string;
}
/** The marketplace release an installed plugin is (pluginapi.Source). */
export interface PluginSource { marketplace: string; version: string; archive_sha256: string; digest: string; index_version: number }
/** A marketplace the server was told about (pluginapi.Marketplace). */
export interface Marketplace {
  name: string; url: string; kind: "kiln" | "claude" | string; keys: string[] | null; unsigned?: boolean;
  /** A Go duration: "72h0m0s"; "0s" offers every version. */
  quarantine: string;
  owner?: string; version?: number; expires?: string; tree_size?: number; tree_hash?: string;
  plugins: number; added: string; refreshed?: string;
  /** Why the last refresh was refused; the last verified index is kept. */
  error?: string;
}
/** The body of POST /marketplaces. */
export interface AddMarketplaceRequest { name: string; url: string; keys?: string[]; kind?: string; trust_unsigned?: boolean; quarantine?: string }
/** One published version of a marketplace plugin. */
export interface MarketplaceVersion {
  version: string; published: string; digest: string; archive_sha256: string; size: number; runtime: string;
  provides: string[] | null; permissions: string[] | null; min_kiln?: string; protocol?: number;
  /** False when it is installed only by exact version; reason says why. */
  offered: boolean; reason?: string;
  /** Signed by a trusted key; log_index is the index version's log entry (-1 for an unsigned source). */
  signed: boolean; log_index: number;
}
/** A plugin a marketplace offers (search results; versions, newest first, only in its details). */
export interface MarketplacePlugin {
  name: string; marketplace: string; description: string; author?: string; homepage?: string; license?: string;
  tags: string[] | null; kinds: string[] | null; latest: string; installed?: string; score?: number; versions?: MarketplaceVersion[] | null;
}
/** The body of POST /marketplace/preview and /marketplace/install (and the answer of GET /plugins/{id}/upgrade). */
export interface MarketplaceInstallRequest { name: string; version?: string; marketplace?: string; consent?: boolean; digest?: string; allow_downgrade?: boolean }
/** The files an upgrade changes, against the installed version. */
export interface PluginChanges { added?: string[] | null; removed?: string[] | null; changed?: string[] | null; summary?: string }
/** What installing a verified marketplace version would do (POST /marketplace/preview). */
export interface MarketplacePreview {
  id: string; version: string; description: string; runtime: string; provides: string[] | null; sha256: string;
  permissions: string[] | null; installed?: string; added?: string[] | null; needs_consent: boolean;
  /** Older than the installed version: installing it needs allow_downgrade. */
  downgrade?: boolean;
  /** The version the installed plugin is pinned at: another is refused until it is unpinned. */
  pinned?: string;
  changes?: PluginChanges;
  marketplace: string; digest: string; archive_sha256: string; size: number; verified: string[] | null; skipped?: string[] | null;
}
/** An installed marketplace plugin with a newer version offered. */
export interface Outdated { name: string; marketplace: string; installed: string; latest: string; pinned?: string }
/** A download's progress: bytes done of total (total 0: unknown). */
export interface Progress { done: number; total: number }
/** One resolved provider setting (plugins/providers/hub/types.go): a secret's value is only "set" or "not set". */
export interface ProviderSetting { name: string; secret: boolean; value: string; source?: string }
/** A model provider as GET /providers lists it; its secrets are redacted by the server. */
export interface Provider {
  id: string; name: string; state: "ready" | "not_configured" | "disabled" | "error" | string; error?: string;
  settings: ProviderSetting[] | null; env: string[] | null;
}
/** A model a provider offers (GET /models). */
export interface ModelInfo { ref: string; provider: string; id: string; name?: string; context_size?: number }
export interface ModelList { models: ModelInfo[] | null; providers: Provider[] | null; default: string }
/** A local folder granted to the agent (GET /grants). */
export interface Grant { id: string; name: string; path: string; writable: boolean; data_root?: boolean; created_at?: string }
/** Default limits of runs that set none; 0 means the server's. */
export interface Limits { max_steps?: number; max_tool_calls?: number }
export type Theme = "system" | "light" | "dark";
/** The owner's settings (GET /settings). */
export interface Settings {
  prompt_addendum: string; limits: Limits; memory: boolean; theme: Theme | string;
  /** The runtime of sandboxes created without one; "" (or absent, an older server) is the server's default. */
  sandbox_runtime?: string;
  updated_at?: string;
}
/** An uploaded file (POST /attachments); uri is how a message part refers to it. */
export interface Attachment { id: string; name: string; mime_type: string; size: number; uri: string; sha256?: string; thread_id?: string; created_at?: string }
/** A long-term memory file: preview in lists, content when one is read or written. */
export interface Memory { name: string; size: number; preview?: string; content?: string; updated_at: string }
/** A file runs wrote outside any grant, kept with the thread (GET /threads/{id}/files). */
export interface VirtualFile { path: string; size: number; seq: number; run_id?: string; updated_at: string }
/** Where a skill comes from; a plugin's names the plugin in source. */
export interface SkillLayer { origin: "custom" | "plugin" | "builtin" | string; source?: string }
export interface SkillWarning { line: number; message: string }
export interface SkillParseError { file: string; line: number; reason: string }
/** The effective skill of a name (GET /skills); body only when one is read. */
export interface Skill extends SkillLayer {
  name: string; description: string; shadows?: SkillLayer[] | null; ready: boolean; not_ready?: string;
  tools?: string[] | null; model?: string; warnings?: SkillWarning[] | null; body?: string;
}
export interface SkillProblem { name: string; origin: string; error: SkillParseError }
export interface SkillCheck { valid: boolean; error?: SkillParseError; warnings: SkillWarning[] | null; skill?: Skill }
/** A connected (or not) MCP server of <data>/.mcp.json. */
export interface McpServer { id: string; state: "connecting" | "connected" | "error" | "disabled" | string; error?: string; protocol?: string; tools?: string[] | null; transport: string; plugin?: string }
/** What a trigger's runs do with a tool call that needs approval (core.Unattended). */
export interface Unattended { mode: "pause" | "reject" | "allow" | string; allow?: string[] }
/** A cron or webhook trigger (GET /triggers); next only for an enabled cron trigger, secret only just after it was made or rotated. */
export interface Trigger {
  id: string; owner_id?: string; name: string; kind: "cron" | "webhook" | string;
  cron?: string; timezone?: string; prompt: string; model?: string; enabled: boolean; thread_id?: string;
  overlap?: string; catchup?: string; /** Nanoseconds. */ catchup_window?: number; unattended?: Unattended; rate_limit?: number;
  last_slot?: string; next?: string[]; secret?: string; created_at: string; updated_at?: string;
}
/** What an occurrence came to: the run's state, or why none started. */
export type Outcome = "running" | "waiting_for_action" | "succeeded" | "failed" | "cancelled" | "queued" | "buffered" | "skipped";
/** One fire of a trigger (GET /triggers/{id}/occurrences); outcome and run_status only when listed. */
export interface Occurrence {
  id: string; trigger_id: string; key: string; cause: "schedule" | "catchup" | "webhook" | "manual" | string; scheduled_at: string;
  status: "started" | "buffered" | "skipped" | "failed" | string; reason?: string; run_id?: string; thread_id?: string; input?: string;
  run_status?: RunStatus; outcome?: Outcome | string; created_at?: string; updated_at?: string;
}
export interface OccurrencePage { occurrences: Occurrence[] | null; next_before?: string }
