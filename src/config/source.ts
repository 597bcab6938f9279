import { existsSync, readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';

/**
 * Where the configuration comes from, before it is validated: the YAML file and the environment
 * overrides. Apart from load.ts (which validates the result against the schema), so that the
 * CLI can find the control socket of a running daemon without loading the schema and its
 * validation library, most of the start-up time of a short command.
 */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

export const ENV_PREFIX = 'POSTILION_';
/** Variables with the prefix that are not option overrides. */
const RESERVED_ENV = new Set(['POSTILION_CONFIG']);
export const DEFAULT_CONFIG_PATH = 'config/postilion.yaml';
/** data.dir when neither the file nor the environment sets it (the schema's default). */
export const DEFAULT_DATA_DIR = './data';

/** The file read (the explicit path, else config/postilion.yaml if present, else none) and its sections. */
export function readConfigFile(path: string | undefined, env: NodeJS.ProcessEnv): { source: string | null; raw: Record<string, unknown> } {
  const explicit = path ?? env.POSTILION_CONFIG;
  let source: string | null = null;
  let raw: unknown = {};
  if (explicit !== undefined) {
    if (!existsSync(explicit)) throw new ConfigError(`config file ${explicit} does not exist`);
    source = explicit;
  } else if (existsSync(DEFAULT_CONFIG_PATH)) {
    source = DEFAULT_CONFIG_PATH;
  }
  if (source !== null) {
    try {
      raw = parseYaml(readFileSync(source, 'utf8')) ?? {};
    } catch (err) {
      throw new ConfigError(`${source}: not valid YAML: ${(err as Error).message}`);
    }
    if (typeof raw !== 'object' || Array.isArray(raw)) {
      throw new ConfigError(`${source}: the top level must be a mapping of sections`);
    }
  }
  return { source, raw: raw as Record<string, unknown> };
}

/**
 * `base` with the POSTILION_SECTION__OPTION variables applied (values read as YAML); a variable
 * naming no option (`optionExists` says which do) is an error.
 */
export function applyEnvOverrides(base: Record<string, unknown>, env: NodeJS.ProcessEnv, optionExists: (path: string[]) => boolean) {
  const out = structuredClone(base);
  const applied: string[] = [];
  for (const [name, value] of Object.entries(env)) {
    if (!name.startsWith(ENV_PREFIX) || RESERVED_ENV.has(name) || value === undefined) continue;
    const path = name.slice(ENV_PREFIX.length).toLowerCase().split('__');
    if (!optionExists(path)) {
      throw new ConfigError(`environment variable ${name} names no option (${path.join('.')})`);
    }
    let parsed: unknown;
    try {
      parsed = parseYaml(value);
    } catch {
      parsed = value;
    }
    let node = out;
    for (const part of path.slice(0, -1)) {
      if (typeof node[part] !== 'object' || node[part] === null) node[part] = {};
      node = node[part] as Record<string, unknown>;
    }
    node[path[path.length - 1]!] = parsed ?? value;
    applied.push(name);
  }
  return { merged: out, applied };
}

/**
 * data.dir as the file and the environment set it, unvalidated: undefined when it is not a
 * non-empty string (validation will say why). Only to find a running daemon's control socket.
 */
export function rawDataDir(path: string | undefined, env: NodeJS.ProcessEnv): string | undefined {
  const { merged } = applyEnvOverrides(readConfigFile(path, env).raw, env, () => true);
  const data = merged.data;
  if (data === undefined) return DEFAULT_DATA_DIR;
  if (typeof data !== 'object' || data === null) return undefined;
  const dir = (data as Record<string, unknown>).dir;
  if (dir === undefined) return DEFAULT_DATA_DIR;
  return typeof dir === 'string' && dir.length > 0 ? dir : undefined;
}
