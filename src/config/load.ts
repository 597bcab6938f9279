import type { z } from 'zod';
import { configSchema, type Config } from './schema.ts';
import { applyEnvOverrides, ConfigError, readConfigFile } from './source.ts';

export { ConfigError, DEFAULT_CONFIG_PATH, ENV_PREFIX } from './source.ts';

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
  const { source, raw } = readConfigFile(options.path, env);
  const { merged, applied } = applyEnvOverrides(raw, env, optionExists);
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
