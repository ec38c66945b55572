-- agentd for Neovim: run agentd tool calls from the editor and show their
-- results in a buffer. Talks JSON-RPC over the daemon's Unix socket with
-- libuv (vim.uv, or vim.loop before Neovim 0.10); needs no other plugin.
--
--   :AgentdStatus                    version, uptime, sessions
--   :AgentdTools                     the tools the session offers
--   :AgentdCall Read {"file_path": "README.md"}
--
-- One session per Neovim, on the current directory, created on first use.
-- The plugin follows the session's events: a call that needs approval (or
-- an AskUserQuestion) is asked with vim.ui.select.

local M = {}
local uv = vim.uv or vim.loop

M.config = { socket = nil, mode = nil }

local function default_socket()
  local env = os.getenv("AGENTD_SOCKET")
  if env and env ~= "" then
    return env
  end
  local runtime = os.getenv("XDG_RUNTIME_DIR")
  if runtime and runtime:sub(1, 1) == "/" then
    return runtime .. "/agentd/agentd.sock"
  end
  return "/tmp/agentd-" .. uv.getuid() .. "/agentd.sock"
end

local encode = (vim.json and vim.json.encode) or vim.fn.json_encode
local decode = (vim.json and vim.json.decode) or vim.fn.json_decode

local conn = nil -- { pipe, pending = {id -> callback}, buffer, next_id }
local session_id = nil

local on_event -- set below: handles turn/event notifications

local function dispatch(line)
  local ok, msg = pcall(decode, line)
  if not ok or type(msg) ~= "table" then
    return
  end
  if msg.method == "turn/event" and type(msg.params) == "table" then
    return on_event(msg.params.result)
  end
  if msg.id == nil then
    return
  end
  local callback = conn.pending[msg.id]
  conn.pending[msg.id] = nil
  if callback then
    callback(msg.error, msg.result)
  end
end

local function connect(on_ready)
  if conn then
    return on_ready(nil)
  end
  local pipe = uv.new_pipe(false)
  pipe:connect(M.config.socket or default_socket(), function(err)
    if err then
      pipe:close()
      return vim.schedule(function()
        on_ready("cannot connect to agentd: " .. err .. " (start it with `agentd &`)")
      end)
    end
    conn = { pipe = pipe, pending = {}, buffer = "", next_id = 0 }
    pipe:read_start(function(read_err, chunk)
      if read_err or not chunk then
        conn = nil
        session_id = nil
        return
      end
      conn.buffer = conn.buffer .. chunk
      while true do
        local nl = conn.buffer:find("\n", 1, true)
        if not nl then
          break
        end
        local line = conn.buffer:sub(1, nl - 1)
        conn.buffer = conn.buffer:sub(nl + 1)
        vim.schedule(function()
          dispatch(line)
        end)
      end
    end)
    vim.schedule(function()
      on_ready(nil)
    end)
  end)
end

--- Sends `method` with `params`; `callback(err, result)` runs on the main loop.
function M.request(method, params, callback)
  connect(function(err)
    if err then
      return callback({ message = err }, nil)
    end
    conn.next_id = conn.next_id + 1
    local id = conn.next_id
    conn.pending[id] = callback
    local line = encode({ jsonrpc = "2.0", id = id, method = method, params = params or vim.empty_dict() })
    conn.pipe:write(line .. "\n")
  end)
end

local function with_session(callback)
  if session_id then
    return callback(nil, session_id)
  end
  -- The plugin's own session ends with Neovim (its connection): none is
  -- left open for each start.
  local params = { cwd = vim.fn.getcwd(), close_with_connection = true }
  if M.config.mode then
    params.mode = M.config.mode
  end
  M.request("session/create", params, function(err, result)
    if err then
      return callback(err, nil)
    end
    session_id = result.session_id
    -- Follow the session's events, to be asked for approvals.
    M.request("turn/stream", { session_id = session_id }, function() end)
    callback(nil, session_id)
  end)
end

local function respond(request_id, decision, answers)
  local params = { session_id = session_id, request_id = request_id, decision = decision }
  if answers then
    params.answers = answers
  end
  M.request("permission/respond", params, function(err)
    if err then
      vim.notify("agentd: " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
    end
  end)
end

--- Asks AskUserQuestion's questions one after the other.
local function ask_questions(event)
  local questions = (event.input or {}).questions or {}
  local answers = {}
  local function next_question(i)
    local q = questions[i]
    if not q then
      return respond(event.request_id, "allow", answers)
    end
    local labels = {}
    for _, o in ipairs(q.options or {}) do
      table.insert(labels, o.label)
    end
    vim.ui.select(labels, { prompt = q.question }, function(choice)
      if choice == nil then
        return respond(event.request_id, "deny")
      end
      answers[q.question] = choice
      next_question(i + 1)
    end)
  end
  next_question(1)
end

--- The last progress line a running call reported (also echoed).
M.last_progress = nil

--- The plugin's session id, once it has one.
function M.session_id()
  return session_id
end

--- What another session or the daemon tells the user: a message from
--- another session, one that went idle, project files that wait for trust.
local function notice(event)
  local line
  if event.type == "message/received" then
    local who = event.from_name or event.from
    line = "message from " .. who .. ": " .. ((event.message or ""):match("^[^\n]*") or "")
  elseif event.type == "cron/fired" then
    line = "schedule " .. (event.cron_id or "?") .. (event.missed and " (missed while the daemon was down)" or "")
      .. ": " .. ((event.prompt or ""):match("^[^\n]*") or "")
  elseif event.type == "monitor/event" then
    -- What it saw (the event's body), else how it ended (its summary).
    local text = event.text or ""
    local body = text:match("<event>(.-)</event>") or text:match("<summary>(.-)</summary>") or text
    line = "monitor " .. (event.task_id or "?") .. " (" .. (event.description or "") .. "): "
      .. (body:match("^[^\n]*") or "")
  elseif event.type == "task/notification" then
    line = "task " .. (event.task_id or "?") .. " " .. (event.status or "") .. ": " .. (event.summary or "")
  elseif event.type == "session/idle" then
    local who = event.name or event.session_id
    line = who .. (event.closed and " closed" or " finished its turn")
  elseif event.type == "trust/required" then
    line = #(event.files or {}) .. " project file(s) not obeyed until approved (agentctl trust)"
  end
  if line then
    -- Shown as text, whatever the repository or the other session put in it.
    line = line:gsub("%c", "?")
    vim.notify("agentd: " .. line, event.type == "trust/required" and vim.log.levels.WARN or vim.log.levels.INFO)
  end
  return line ~= nil
end
-- For the plugin's tests: what an event would show.
M.notice = notice

on_event = function(event)
  if type(event) ~= "table" then
    return
  end
  if event.type == "tool/progress" then
    local line = ((event.render or ""):match("([^\n]*)\n*$") or ""):gsub("\t", " ")
    M.last_progress = line
    vim.api.nvim_echo({ { "agentd: " .. line:sub(1, math.max(vim.o.columns - 12, 20)) } }, false, {})
    return
  end
  if notice(event) then
    return
  end
  if event.type ~= "permission/request" then
    return
  end
  if event.tool == "AskUserQuestion" then
    return ask_questions(event)
  end
  local choices = { "Allow", "Deny" }
  local suggestion = (event.suggestions or {})[1]
  if suggestion then
    table.insert(choices, "Always allow " .. suggestion)
  end
  local prompt = "agentd: " .. (event.render or event.tool) .. " — " .. (event.reason or "")
  if event.kind == "effects" and event.diff then
    -- What a command changed, waiting for the answer: shown as a diff.
    local lines = {}
    for _, change in ipairs(event.changes or {}) do
      table.insert(lines, "# " .. (change.kind or "?") .. " " .. (change.path or "?"))
    end
    for l in (event.diff .. "\n"):gmatch("(.-)\n") do
      table.insert(lines, l)
    end
    local buf = M.show("changes", lines)
    vim.bo[buf].filetype = "diff"
  end
  vim.ui.select(choices, { prompt = prompt }, function(_, idx)
    local decision = ({ "allow", "deny", "allow_always" })[idx or 2] or "deny"
    respond(event.request_id, decision)
  end)
end

--- Runs one tool call; `callback(err, result)` gets the tool/call result.
function M.call(tool, input, callback)
  with_session(function(err, sid)
    if err then
      return callback(err, nil)
    end
    M.request("tool/call", { session_id = sid, name = tool, input = input or vim.empty_dict() }, callback)
  end)
end

--- Shows `lines` in a scratch buffer named `title`.
function M.show(title, lines)
  local buf = vim.api.nvim_create_buf(false, true)
  vim.api.nvim_buf_set_lines(buf, 0, -1, false, lines)
  pcall(vim.api.nvim_buf_set_name, buf, "agentd://" .. title .. "/" .. buf)
  vim.api.nvim_set_current_buf(buf)
  return buf
end

local function result_lines(result)
  local lines = {}
  for _, block in ipairs(result.content or {}) do
    if block.type == "text" then
      for l in (block.text .. "\n"):gmatch("(.-)\n") do
        table.insert(lines, l)
      end
    else
      table.insert(lines, "[" .. (block.type or "?") .. " block]")
    end
  end
  table.insert(lines, "")
  -- One line: a buffer line cannot hold a newline.
  local render = ((result.render or ""):match("^[^\n]*") or ""):gsub("\t", " ")
  table.insert(lines, (result.is_error and "✗ " or "✓ ") .. render)
  return lines
end

local function report(err)
  vim.notify("agentd: " .. (err.message or vim.inspect(err)), vim.log.levels.ERROR)
end

function M.command_call(args)
  local tool, json = args:match("^%s*(%S+)%s*(.*)$")
  if not tool then
    return report({ message = "usage: :AgentdCall Tool {json input}" })
  end
  local input = vim.empty_dict()
  if json and json ~= "" then
    local ok, parsed = pcall(decode, json)
    if not ok then
      return report({ message = "the input is not JSON: " .. tostring(parsed) })
    end
    input = parsed
  end
  M.call(tool, input, function(err, result)
    if err then
      return report(err)
    end
    M.show(tool, result_lines(result))
  end)
end

--- Cancels everything the plugin's session is running (`:AgentdCancel`).
function M.command_cancel(callback)
  if not session_id then
    vim.notify("agentd: nothing is running")
    return callback and callback(nil, { cancelled = {} })
  end
  M.request("turn/cancel", { session_id = session_id }, function(err, result)
    if err then
      report(err)
    else
      vim.notify(string.format("agentd: cancelled %d call(s)", #(result.cancelled or {})))
    end
    if callback then
      callback(err, result)
    end
  end)
end

function M.command_tools()
  with_session(function(err, sid)
    if err then
      return report(err)
    end
    M.request("tools/list", { session_id = sid }, function(list_err, list)
      if list_err then
        return report(list_err)
      end
      local lines = {}
      for _, t in ipairs(list.tools) do
        table.insert(lines, t.name .. "  " .. (t.description:match("^[^\n]*") or ""))
      end
      M.show("tools", lines)
    end)
  end)
end

function M.command_status()
  M.request("daemon/info", nil, function(err, info)
    if err then
      return report(err)
    end
    vim.notify(
      string.format("agentd %s (protocol %d), %d sessions, up %d s", info.version, info.protocol_version, info.sessions, math.floor(info.uptime_ms / 1000))
    )
  end)
end

function M.setup(opts)
  M.config = vim.tbl_extend("force", M.config, opts or {})
end

M.result_lines = result_lines

return M
