//! `ddscope completions SHELL`: the shell's completion script on stdout.

use clap::{Args, CommandFactory, ValueEnum};
use clap_complete::Shell;
use std::io::Write;

#[derive(Args, Debug)]
#[command(after_help = "\
Examples:
  ddscope completions bash > ~/.local/share/bash-completion/completions/ddscope
  ddscope completions zsh > ~/.zfunc/_ddscope   # fpath+=(~/.zfunc) before compinit, ~/.zshrc
  ddscope completions fish > ~/.config/fish/completions/ddscope.fish
  source <(ddscope completions bash)                # this shell only")]
pub struct CompletionsArgs {
    /// The shell to write the completion script for
    #[arg(value_enum)]
    pub shell: CompletionShell,
}

#[derive(Copy, Clone, Debug, PartialEq, Eq, ValueEnum)]
pub enum CompletionShell {
    Bash,
    Zsh,
    Fish,
}

pub fn run<C: CommandFactory>(a: CompletionsArgs) -> anyhow::Result<i32> {
    let shell = match a.shell {
        CompletionShell::Bash => Shell::Bash,
        CompletionShell::Zsh => Shell::Zsh,
        CompletionShell::Fish => Shell::Fish,
    };
    let mut cmd = C::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "ddscope", &mut script);
    // Into `head` and the like: a closed pipe ends the output quietly.
    match std::io::stdout().write_all(&script).and_then(|_| std::io::stdout().flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => Err(e.into()),
        _ => Ok(0),
    }
}
