//! `ddscope lab …` — placeholder until the lab issue lands its subcommands.
#[derive(clap::Args, Debug)]
pub struct LabArgs {}

pub fn run(_args: LabArgs) -> anyhow::Result<i32> {
    anyhow::bail!("ddscope lab is not built yet")
}
