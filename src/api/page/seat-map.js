// The seat map both the waiting page and the operator console draw (one file, served to each):
// a venue's layout (`GET /v1/public/layouts/{id}`) as SVG, the stage and each seat a focusable
// circle that a click, Space or Enter toggles; and the seats' states in a seat-map answer, whose
// rows carry them as runs ("f12h1s3": 12 free, 1 held, 3 sold).
'use strict';

const SeatMap = (() => {
  const SVG = 'http://www.w3.org/2000/svg';
  const STATES = { f: 'free', h: 'held', s: 'sold', x: 'off' };

  /// An SVG element with its attributes.
  function element(name, attributes) {
    const el = document.createElementNS(SVG, name);
    for (const [k, v] of Object.entries(attributes)) el.setAttribute(k, v);
    return el;
  }

  /// `layout` drawn as an SVG. Each seat's circle `el`, with its id (`<section>-<row>-<number>`),
  /// goes to `make({ id, el, section, row, seat })`, which keeps the caller's record of it; a
  /// click, Space or Enter on the circle calls `toggle(record)`.
  function draw(layout, make, toggle) {
    const st = layout.stage;
    const xs = [st.x, st.x + st.width];
    const ys = [st.y, st.y + st.height];
    for (const section of layout.sections) for (const row of section.rows) for (const s of row.seats) { xs.push(s.x); ys.push(s.y); }
    const pad = 80;
    const [x0, y0] = [Math.min(...xs) - pad, Math.min(...ys) - pad];
    const svg = element('svg', {
      viewBox: `${x0} ${y0} ${Math.max(...xs) + pad - x0} ${Math.max(...ys) + pad - y0}`, role: 'group',
    });
    const stageLabel = element('text', { x: st.x + st.width / 2, y: st.y + st.height / 2, class: 'stage-label' });
    stageLabel.textContent = st.label;
    svg.append(element('rect', { x: st.x, y: st.y, width: st.width, height: st.height, class: 'stage' }), stageLabel);
    for (const section of layout.sections) {
      const group = element('g', { role: 'group', 'aria-label': section.name });
      for (const row of section.rows) {
        for (const seat of row.seats) {
          const id = `${section.id}-${row.id}-${seat.number}`;
          const el = element('circle', { cx: seat.x, cy: seat.y, r: 22, tabindex: 0, role: 'checkbox' });
          el.dataset.seat = id;
          const record = make({ id, el, section, row, seat });
          el.addEventListener('click', () => toggle(record));
          el.addEventListener('keydown', (ev) => {
            if (ev.key === ' ' || ev.key === 'Enter') { ev.preventDefault(); toggle(record); }
          });
          group.append(el);
        }
      }
      svg.append(group);
    }
    return svg;
  }

  /// Each seat of the seat-map answer `map` with its state (free, held, sold or off):
  /// `set(id, state)`, row by row in `layout`'s order.
  function eachState(layout, map, set) {
    for (const section of map.sections) {
      const rows = layout.sections.find((s) => s.id === section.id).rows;
      for (const row of section.rows) {
        const numbers = rows.find((r) => r.id === row.id).seats.map((x) => x.number);
        let at = 0;
        for (const [, letter, count] of row.states.matchAll(/([fhsx])(\d+)/g)) {
          for (let i = 0; i < Number(count); i++, at++) set(`${section.id}-${row.id}-${numbers[at]}`, STATES[letter]);
        }
      }
    }
  }

  return { draw, element, eachState };
})();
