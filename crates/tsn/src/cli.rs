//! `ddscope tsn …` — placeholder until the TSN issue lands its subcommands.
#[derive(clap::Args, Debug)]
pub struct TsnArgs {}

pub fn run(_args: TsnArgs) -> anyhow::Result<i32> {
    anyhow::bail!("ddscope tsn is not built yet")
}
