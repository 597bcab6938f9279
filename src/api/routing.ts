import type Koa from 'koa';
import type Router from '@koa/router';
import type { Layer as RouteLayer, MatchResult } from '@koa/router';
import { Lru } from '../util/lru.ts';
import type { ApiState } from './context.ts';

/** Paths whose route match is kept: an account's send path is matched once, not per request. */
const MATCHES_KEPT = 1000;

/**
 * The router tries every route's pattern in turn on each request (about 60 regular expressions);
 * the answer depends only on the path and method, and the routes are fixed once built, so it is
 * kept per (method, path). Each caller gets fresh outer arrays: the router may append to the
 * list of path matches it stores on the context.
 */
export function rememberMatches(router: Router<ApiState>): void {
  const kept = new Lru<string, MatchResult<ApiState>>(MATCHES_KEPT);
  const match = router.match.bind(router);
  router.match = (path: string, method: string): MatchResult<ApiState> => {
    const key = `${method} ${path}`;
    let found = kept.get(key);
    if (found === undefined) {
      found = match(path, method);
      kept.set(key, found);
    }
    return { path: [...found.path], pathAndMethod: [...found.pathAndMethod], route: found.route };
  };
}

/** A (method, path) that matches one route: what the router would set on the context for it. */
interface Routed {
  layer: RouteLayer<ApiState>;
  /** The layers matching the path (whatever their method), as the router lists them. */
  matched: RouteLayer<ApiState>[];
  captures: string[];
  params: Record<string, string>;
  handler: Koa.Middleware<ApiState>;
}

/** The router's own view of the context it sets up for a route. */
interface RoutedContext {
  matched?: RouteLayer<ApiState>[];
  router: Router<ApiState>;
  routeMatched: boolean;
  captures: string[];
  params: Record<string, string>;
  request: { params: Record<string, string> };
  routerPath: string | RegExp;
  routerName: string | undefined;
  _matchedRoute: string | RegExp;
  _matchedRouteName?: string;
}

/**
 * The router's middleware, its per-request work done once per (method, path): for every request
 * the router reads the host, sorts out the matched layers, composes their middleware anew and
 * decodes the path's parameters, all of which depend only on the method and path. A request that
 * matches exactly one route (one handler: the chain of chainOf) gets the context the router would
 * give it (fresh copies) and runs that handler; anything else goes through the router itself.
 */
export function routedBy(router: Router<ApiState>): Koa.Middleware<ApiState> {
  const dispatch = router.routes() as unknown as Koa.Middleware<ApiState>;
  const kept = new Lru<string, Routed | null>(MATCHES_KEPT);
  return (ctx, next) => {
    const path = ctx.path;
    const method = ctx.method;
    const key = `${method} ${path}`;
    let routed = kept.get(key);
    if (routed === undefined) {
      routed = routeOf(router, path, method);
      kept.set(key, routed);
    }
    if (routed === null) return dispatch(ctx, next) as Promise<void>;
    const routing = ctx as unknown as RoutedContext;
    const { layer } = routed;
    routing.matched = [...routed.matched];
    routing.router = router;
    routing.routeMatched = true;
    routing.captures = [...routed.captures];
    routing.request.params = { ...routed.params };
    routing.params = routing.request.params;
    routing.routerPath = layer.path;
    routing.routerName = layer.name || undefined;
    routing._matchedRoute = layer.path;
    if (layer.name) routing._matchedRouteName = layer.name;
    return routed.handler(ctx, next) as Promise<void>;
  };
}

function routeOf(router: Router<ApiState>, path: string, method: string): Routed | null {
  const found = router.match(path, method);
  const layer = found.pathAndMethod.length === 1 ? found.pathAndMethod[0]! : null;
  if (!found.route || !layer || layer.methods.length === 0 || layer.stack.length !== 1) return null;
  const captures = layer.captures(path);
  return {
    layer,
    matched: found.path,
    captures,
    params: layer.params(path, captures),
    handler: layer.stack[0] as unknown as Koa.Middleware<ApiState>,
  };
}
