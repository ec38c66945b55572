//! The Neovim plugin (client/nvim), headless, against a real daemon.

use std::process::{Command, Stdio};

use agentd_tests::StandaloneDaemon;

const SCRIPT: &str = r#"
vim.opt.runtimepath:append(os.getenv("PLUGIN_DIR"))
vim.cmd("runtime plugin/agentd.lua")
local agentd = require("agentd")
local out = {}
local done = false
agentd.call("Read", { file_path = "hello.txt" }, function(err, result)
  if err then
    table.insert(out, "error " .. vim.inspect(err))
  else
    for _, l in ipairs(agentd.result_lines(result)) do table.insert(out, l) end
  end
  done = true
end)
vim.wait(20000, function() return done end, 10)
-- The command shows the result in a buffer.
vim.cmd('AgentdCall Grep {"pattern": "hello", "output_mode": "count"}')
vim.wait(20000, function() return vim.api.nvim_buf_get_name(0):find("agentd://Grep") ~= nil end, 10)
for _, l in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do table.insert(out, "buf: " .. l) end
-- A call that needs approval is asked with vim.ui.select: pick "Allow".
vim.ui.select = function(items, opts, on_choice)
  table.insert(out, "asked: " .. opts.prompt .. " [" .. table.concat(items, "|") .. "]")
  on_choice(items[1], 1)
end
local asked_done = false
agentd.call("Bash", { command = "touch from-nvim" }, function(err, result)
  table.insert(out, "bash: " .. vim.inspect(err) .. " " .. tostring(result and result.is_error))
  asked_done = true
end)
vim.wait(20000, function() return asked_done end, 10)
-- A long call shows its progress, and :AgentdCancel stops it.
vim.ui.select = function(items, opts, on_choice) on_choice(items[1], 1) end
-- Through the commands, as a user runs them: the cancelled result shows in
-- its buffer (issue 49 #7: its one-line summary held the whole output, and
-- the buffer could not take it).
local errors = {}
local notify = vim.notify
vim.notify = function(msg, level, opts)
  if level == vim.log.levels.ERROR then table.insert(errors, msg) end
  return notify(msg, level, opts)
end
vim.cmd('AgentdCall Bash {"command": "echo tick-from-nvim; sleep 30"}')
vim.wait(20000, function() return agentd.last_progress ~= nil and agentd.last_progress:find("tick") ~= nil end, 10)
table.insert(out, "progress: " .. tostring(agentd.last_progress))
local ok, cancel_err = pcall(vim.cmd, "AgentdCancel")
table.insert(out, "cancel: " .. tostring(ok) .. (ok and "" or " " .. tostring(cancel_err)))
vim.wait(20000, function() return vim.api.nvim_buf_get_name(0):find("agentd://Bash") ~= nil end, 10)
for _, l in ipairs(vim.api.nvim_buf_get_lines(0, 0, -1, false)) do table.insert(out, "long: " .. l) end
-- Another session messages the plugin's: a notification.
local notices = {}
vim.notify = function(msg, level, opts)
  if msg:find("^agentd: message from") then table.insert(notices, msg) end
  return notify(msg, level, opts)
end
agentd.request("session/create", { cwd = vim.fn.getcwd(), name = "peer" }, function(err, created)
  local input = { to = agentd.session_id(), message = "hello from peer\nsecond line" }
  agentd.request("tool/call", { session_id = created.session_id, name = "SendMessage", input = input }, function() end)
end)
vim.wait(20000, function() return #notices > 0 end, 10)
-- A schedule's firing (its minute is not waited for: the event as it comes).
vim.notify = function(msg, level, opts) table.insert(notices, msg) end
agentd.notice({ type = "cron/fired", cron_id = "c1", prompt = "standup\nand more", missed = true })
agentd.notice({ type = "monitor/event", task_id = "job_1", description = "build", text = "<task-notification>\n<event>ERROR x\nmore</event>" })
for _, n in ipairs(notices) do table.insert(out, "notice: " .. n) end
for _, e in ipairs(errors) do table.insert(out, "error: " .. e) end
vim.fn.writefile(out, os.getenv("OUT_FILE"))
vim.cmd("qa!")
"#;

#[test]
fn the_neovim_plugin_runs_a_tool_call_and_shows_the_result() {
    if Command::new("nvim").arg("--version").output().is_err() {
        panic!("nvim is not installed (Debian package neovim; .ci/run installs it)");
    }
    let d = StandaloneDaemon::start(&[], &[]);
    let work = tempfile::tempdir().unwrap();
    std::fs::write(work.path().join("hello.txt"), "hello from nvim\n").unwrap();
    let script = work.path().join("test.lua");
    std::fs::write(&script, SCRIPT).unwrap();
    let out_file = work.path().join("out.txt");
    let status = Command::new("nvim")
        .args(["--headless", "-u", "NONE", "-n", "-c"])
        .arg(format!("luafile {}", script.display()))
        .current_dir(work.path())
        .env("AGENTD_SOCKET", &d.socket)
        .env("PLUGIN_DIR", concat!(env!("CARGO_MANIFEST_DIR"), "/../client/nvim"))
        .env("OUT_FILE", &out_file)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    let out = std::fs::read_to_string(&out_file).unwrap_or_default();
    assert!(status.status.success(), "{out}\n{}", String::from_utf8_lossy(&status.stderr));
    assert!(out.contains("1\thello from nvim"), "{out}");
    // Issue 49 #13: one line is "1 line".
    assert!(out.contains("✓ Read 1 line of 1\n"), "{out}");
    assert!(out.contains("buf: ") && out.contains("hello.txt:1"), "{out}");
    assert!(out.contains("asked: agentd: $ touch from-nvim") && out.contains("[Allow|Deny|"), "{out}");
    assert!(out.contains("bash: nil false") && work.path().join("from-nvim").exists(), "{out}");
    assert!(out.contains("progress: tick-from-nvim"), "the progress shows: {out}");
    assert!(out.contains("cancel: true\n"), "{out}");
    assert_eq!(out.matches("long: tick-from-nvim").count(), 1, "the output, once: {out}");
    assert!(out.contains("long: ✗ cancelled: the user interrupted this call\n"), "one line of summary: {out}");
    assert!(!out.contains("error: "), "{out}");
    assert!(out.contains("notice: agentd: message from peer: hello from peer\n"), "{out}");
    assert!(out.contains("notice: agentd: schedule c1 (missed while the daemon was down): standup\n"), "{out}");
    assert!(out.contains("notice: agentd: monitor job_1 (build): ERROR x\n"), "{out}");
}
