import { existsSync, readFileSync } from 'node:fs';
import { parse as parseYaml } from 'yaml';
import type { z } from 'zod';
import { configSchema, type Config } from './schema.ts';

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export const ENV_PREFIX = 'POSTILION_';
/** Variables with the prefix that are not option overrides. */
const RESERVED_ENV = new Set(['POSTILION_CONFIG']);
export const DEFAULT_CONFIG_PATH = 'config/postilion.yaml';

export interface LoadOptions {
  /** Explicit --config path; a missing file is then an error. */
  path?: string;
  env?: NodeJS.ProcessEnv;
}

export interface LoadedConfig {
  config: Config;
  /** The file that was read, or null when running on built-in defaults. */
  source: string | null;
}

/**
 * Reads the YAML file (the explicit path, else config/postilion.yaml if present, else none),
 * applies POSTILION_SECTION__OPTION environment overrides and validates the result once.
 */
export function loadConfig(options: LoadOptions = {}): LoadedConfig {
  const env = options.env ?? process.env;
  const explicit = options.path ?? env.POSTILION_CONFIG;
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
  const { merged, applied } = applyEnvOverrides(raw as Record<string, unknown>, env);
  const origin = [source ?? 'built-in defaults', ...applied].join(' + ');
  return { config: validateConfig(merged, origin), source };
}

export function validateConfig(input: unknown, origin: string): Config {
  const result = configSchema.safeParse(input);
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => {
    const path = issue.path.join('.');
    if (issue.code === 'unrecognized_keys') {
      const keys = issue.keys.map((k) => (path ? `${path}.${k}` : k));
      return `unknown option ${keys.join(', ')}`;
    }
    return `${path || '(top level)'}: ${issue.message}`;
  });
  throw new ConfigError(`invalid configuration (${origin}):\n  ${lines.join('\n  ')}`);
}

function applyEnvOverrides(base: Record<string, unknown>, env: NodeJS.ProcessEnv) {
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

/** Walks the schema's object shapes; wrappers (default, prefault, pipes) are looked through. */
function optionExists(path: string[]): boolean {
  let schema: z.core.$ZodType = configSchema;
  for (const part of path) {
    const shape = objectShape(schema);
    if (!shape || !Object.hasOwn(shape, part)) return false;
    schema = shape[part]!;
  }
  return true;
}

function objectShape(schema: z.core.$ZodType): Record<string, z.core.$ZodType> | null {
  let current: z.core.$ZodType | undefined = schema;
  for (let i = 0; current && i < 10; i++) {
    const def = current._zod.def as { type: string; shape?: Record<string, z.core.$ZodType>; innerType?: z.core.$ZodType; in?: z.core.$ZodType };
    if (def.type === 'object') return def.shape ?? null;
    current = def.innerType ?? def.in;
  }
  return null;
}
