import type { Command } from 'commander';
import { loadConfig } from '../config/load.ts';

/** Loads the configuration named by the global --config option (or the defaults). */
export function configFrom(program: Command) {
  return loadConfig({ path: program.opts<{ config?: string }>().config }).config;
}
