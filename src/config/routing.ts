/**
 * A validated config mapped onto what the routing core and the scraper take. The routing core never sees
 * the config file's schema: this is the one place that knows both.
 */
import type { Config } from './schema.js';

/** The router's view of a config. */
export function routerConfig(cfg: Config): Config {
  return cfg;
}

/** The scraper's view of a config. */
export function scraperConfig(cfg: Config): Config {
  return cfg;
}
