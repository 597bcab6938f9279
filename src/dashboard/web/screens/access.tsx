import type { ScreenRoute } from './types.ts';

export const routes: ScreenRoute[] = [];
