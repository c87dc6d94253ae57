// One CLI command (or command group): a module that adds itself to the program. Adding a command
// is adding one module and one line in registry.ts.
import type { Command } from 'commander';
import type { CliContext } from './context.ts';

export interface CliCommand {
  register(program: Command, ctx: CliContext): void;
}
