// A time chart drawn by uPlot on a canvas. uPlot paints with colours given in code, not CSS, so
// they are read from the style sheet's variables when the chart is drawn, and the chart is drawn
// again when the person's light/dark setting changes. Lines differ by dash as well as colour.
// uPlot sizes its elements through element.style (the CSSOM), which `style-src 'self'` allows.
import { useEffect, useRef, useState } from 'preact/hooks';
import uPlot from 'uplot';
import 'uplot/dist/uPlot.min.css';
import './chart.css';

/** One line: its name and a value per x (null where there is none). */
export interface Line {
  label: string;
  values: Array<number | null>;
  /** Index into the palette (--chart-0 … --chart-7 in chart.css). */
  colour: number;
}

const PALETTE_SIZE = 8;
const DASHES: number[][] = [[], [8, 4], [2, 3], [10, 3, 2, 3]];
const HEIGHT = 260;
const MIN_WIDTH = 240;

/** Axis steps for counts: 1, 2, 5, 10, 20, 50, … (never half a message). */
const WHOLE_STEPS = Array.from({ length: 30 }, (_, i) => [1, 2, 5][i % 3]! * 10 ** Math.floor(i / 3));

function dashOf(i: number): number[] {
  return DASHES[i % DASHES.length]!;
}

/** The chart and its legend. `xs` are seconds since the epoch; times are shown in UTC. */
export function Chart(props: {
  xs: number[];
  lines: Line[];
  label: string;
  /** A y value as people read it. */
  format: (value: number) => string;
  /** Whole numbers only on the y axis (counts). */
  whole?: boolean;
  /** An x tick (seconds since the epoch) as people read it, and the steps ticks may take (seconds). */
  time: { format: (seconds: number) => string; steps: number[] };
}) {
  const box = useRef<HTMLDivElement>(null);
  const scheme = useColourScheme();
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const css = getComputedStyle(document.documentElement);
    const colour = (name: string, fallback: string) => css.getPropertyValue(name).trim() || fallback;
    const axis = colour('--muted', '#57606a');
    const grid = colour('--line', '#d0d7de');
    const many = props.xs.length > 60;
    const plot = new uPlot(
      {
        width: Math.max(MIN_WIDTH, el.clientWidth),
        height: HEIGHT,
        legend: { show: false },
        cursor: { drag: { x: false, y: false } },
        tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), 'Etc/UTC'),
        scales: { x: { time: true }, y: { range: (_u, _min, max) => [0, max > 0 ? max * 1.1 : 1] } },
        axes: [
          {
            stroke: axis,
            grid: { stroke: grid, width: 1 },
            ticks: { stroke: grid, width: 1 },
            incrs: props.time.steps,
            values: (_u, splits) => splits.map(props.time.format),
          },
          {
            stroke: axis,
            grid: { stroke: grid, width: 1 },
            ticks: { stroke: grid, width: 1 },
            size: 60,
            values: (_u, splits) => splits.map(props.format),
            ...(props.whole ? { incrs: WHOLE_STEPS } : {}),
          },
        ],
        series: [
          {},
          ...props.lines.map((line, i) => ({
            label: line.label,
            stroke: colour(`--chart-${line.colour % PALETTE_SIZE}`, axis),
            width: 2,
            dash: dashOf(i),
            // Points where lines are short: few periods, or values with gaps between them.
            points: { show: !many || line.values.filter((v) => v !== null).length < 3, size: 6 },
          })),
        ],
      },
      [props.xs, ...props.lines.map((line) => line.values)],
      el,
    );
    const resize = new ResizeObserver(() => {
      const width = Math.max(MIN_WIDTH, el.clientWidth);
      if (width !== plot.width) plot.setSize({ width, height: HEIGHT });
    });
    resize.observe(el);
    return () => {
      resize.disconnect();
      plot.destroy();
    };
  }, [props.xs, props.lines, props.format, props.whole, props.time, scheme]);

  return (
    <div class="chart">
      <div ref={box} class="chart-canvas" role="img" aria-label={`${props.label}: a chart of the figures in the table below`} />
      <ul class="chart-legend" aria-hidden="true">
        {props.lines.map((line, i) => (
          <li key={line.label}>
            <svg width="28" height="10" viewBox="0 0 28 10" focusable="false">
              <line
                x1="0"
                y1="5"
                x2="28"
                y2="5"
                class={`c${line.colour % PALETTE_SIZE}`}
                stroke-width="3"
                stroke-dasharray={dashOf(i).join(' ') || undefined}
              />
            </svg>
            {line.label}
          </li>
        ))}
      </ul>
    </div>
  );
}

/** Changes when the person's light/dark setting does, so charts repaint in the new colours. */
function useColourScheme(): boolean {
  const query = '(prefers-color-scheme: dark)';
  const [dark, setDark] = useState(() => matchMedia(query).matches);
  useEffect(() => {
    const media = matchMedia(query);
    const changed = () => setDark(media.matches);
    media.addEventListener('change', changed);
    return () => media.removeEventListener('change', changed);
  }, []);
  return dark;
}
