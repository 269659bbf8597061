<section class="downloads" aria-labelledby="downloads-heading">
  <h2 id="downloads-heading">Downloads</h2>
  <p class="downloads-summary">
  % for text, day in chart.summary:
  % if day:
<span class="day">{{text}}</span>\\
  % else:
{{text}}\\
  % end
  % end
  </p>
  <figure class="chart">
    <svg xmlns="http://www.w3.org/2000/svg" width="100%" height="{{chart.height}}" role="img" aria-labelledby="chart-title" aria-describedby="chart-desc">
      <title id="chart-title">{{chart.title}}</title>
      <desc id="chart-desc">{{chart.description}}</desc>
      <line class="grid" x1="0" x2="100%" y1="{{chart.top}}" y2="{{chart.top}}"/>
      % if chart.top_label:
      <text x="0" y="{{chart.top - 6}}">{{chart.top_label}}</text>
      % end
      % for bar in chart.bars:
      <rect class="bar" x="{{bar.x}}%" y="{{bar.y}}" width="{{bar.width}}%" height="{{bar.height}}"><title>{{bar.title}}</title></rect>
      % end
      <line class="axis" x1="0" x2="100%" y1="{{chart.base}}" y2="{{chart.base}}"/>
      % for day, x, anchor in chart.labels:
      <text x="{{x}}" y="{{chart.height - 8}}" text-anchor="{{anchor}}">{{day}}</text>
      % end
    </svg>
  </figure>
  <details class="days">
    <summary>The downloads of each day, as a table</summary>
    <table>
      <caption>{{chart.title}}, oldest first (UTC)</caption>
      <thead><tr><th scope="col">Day</th><th scope="col">Downloads</th></tr></thead>
      <tbody>
      % for day, n in chart.days:
        <tr><th scope="row">{{day}}</th><td>{{n}}</td></tr>
      % end
      </tbody>
    </table>
  </details>
</section>
