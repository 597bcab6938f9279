import type { Command } from 'commander';
import { rawDataDir } from '../config/source.ts';
import { controlSocketIn } from '../control/protocol.ts';

/**
 * Where the running daemon's control socket would be, found from data.dir alone, without
 * validating the configuration: the schema and its validation library take most of a short
 * command's start-up, and a daemon that answers there validated the configuration it runs with.
 * Undefined when data.dir is not a string: validating the configuration will say why.
 */
export function controlSocketFrom(program: Command): string | undefined {
  const dir = rawDataDir(program.opts<{ config?: string }>().config, process.env);
  return dir === undefined ? undefined : controlSocketIn(dir);
}
