//! End-to-end tests: the real daemon on a real socket. One binary, so the
//! workspace links once (as ripgrep and codex-rs do).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod agent_tools;
mod agentctl;
mod agents;
mod bad_input;
mod bash;
mod conventions;
mod deploy;
mod fidelity;
mod files;
mod first_hour;
mod gate;
mod grep_vs_rg;
mod hooks;
mod lifecycle;
mod mcp;
mod nvim;
mod pdf;
mod permissions;
mod policy;
mod python;
mod readme;
mod restart;
mod sandbox;
mod seams;
mod search;
mod sessions;
mod socket;
mod systemd;
mod terminal;
mod tls;
mod tools;
mod turns;
mod web;
mod worktree;
